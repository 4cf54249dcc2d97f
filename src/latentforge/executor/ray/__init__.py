"""The Ray executor: units in Ray actors across a cluster, with node checks, a unit queue and driver guards."""

"""Looking at a cache: dataset-level statistics, plots and an HTML report, and previews."""

"""s3:// through s3fs: AWS S3 or any S3-compatible endpoint (MinIO, Ceph, R2, OSS's S3 API ...).

Every object carries its hex SHA-256 as user metadata (x-amz-meta-sha256) and, unless disabled, a server-side
SHA-256 checksum (ChecksumAlgorithm SHA256): the sender passes the checksum it computed from the bytes it read,
so a server that checks it refuses bytes damaged on the way. A multipart object's server checksum is the SHA-256
of its parts' SHA-256s, which FileDigest predicts from the same part size. A copy within the bucket (an earlier
version's object with the bytes a new one needs) is made in the same parts, so it carries the same checksums.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
from pathlib import Path
from typing import Any, BinaryIO, Callable

from ..errors import CacheIntegrityError, ConfigError
from ..progress import uncounted
from .digests import FileDigest
from .stores import MISSING, Remote, open_source, size_differs

METADATA_KEY = "sha256"


def _b64(digest: bytes) -> str:
    return base64.b64encode(digest).decode("ascii")


class S3Remote(Remote):
    stores_checksums = True

    def __init__(self, url: str, storage_options: dict[str, Any], part_size: int, server_checksum: bool):
        try:
            import s3fs
        except ImportError as error:
            raise ConfigError(f"{url}: s3:// needs s3fs; pip install 'latentforge[publish]'") from error
        self.url = url
        self.part_size = part_size
        self.server_checksum = server_checksum
        # Without server checksums a copy's only vouch is the x-amz-meta-sha256 the copier wrote: read it back.
        self.checksums_copies = server_checksum
        # No listing cache: publish must see what is on the server now, not what it saw a moment ago.
        self.fs = s3fs.S3FileSystem(skip_instance_cache=True, use_listings_cache=False, **storage_options)
        bucket, prefix, _ = self.fs.split_path(url)
        if not bucket:
            raise ConfigError(f"{url}: no bucket in the URL; use s3://BUCKET/PREFIX")
        self.bucket, self.prefix = bucket, prefix.strip("/")
        try:
            self.fs.call_s3("head_bucket", Bucket=bucket)
        except OSError as error:
            raise ConfigError(
                f"{url}: bucket {bucket!r} cannot be reached ({error}); create it, or fix the storage options "
                "(endpoint_url, key, secret, profile) or the AWS_* environment"
            ) from error

    def _key(self, rel: str) -> str:
        return f"{self.prefix}/{rel}" if self.prefix else rel

    def list_files(self) -> list[str]:
        start = f"{self.prefix}/" if self.prefix else ""
        found: list[str] = []
        request: dict[str, Any] = {"Bucket": self.bucket, "Prefix": start}
        while True:
            page = self.fs.call_s3("list_objects_v2", **request)
            found += [item["Key"][len(start) :] for item in page.get("Contents", []) if not item["Key"].endswith("/")]
            if not page.get("IsTruncated"):
                return sorted(found)
            request["ContinuationToken"] = page["NextContinuationToken"]

    def _head(self, rel: str) -> dict[str, Any] | None:
        try:
            return self.fs.call_s3("head_object", Bucket=self.bucket, Key=self._key(rel), ChecksumMode="ENABLED")
        except FileNotFoundError:
            return None

    def size(self, rel: str) -> int | None:
        head = self._head(rel)
        return None if head is None else int(head["ContentLength"])

    def problem(self, rel: str, digest: FileDigest, deep: bool) -> str | None:
        head = self._head(rel)
        if head is None:
            return MISSING
        if int(head["ContentLength"]) != digest.size:
            return size_differs(int(head["ContentLength"]), digest)
        stored = head.get("Metadata", {}).get(METADATA_KEY)
        if stored != digest.sha256:
            return f"checksum differs (x-amz-meta-{METADATA_KEY} is {stored or 'absent'}, expected {digest.sha256})"
        if self.server_checksum:
            reason = _server_checksum_problem(head.get("ChecksumSHA256"), digest)
            if reason:
                return reason
        return self.content_problem(rel, digest) if deep else None

    def open_read(self, rel: str) -> BinaryIO:
        return self.fs.open(f"{self.bucket}/{self._key(rel)}", "rb")

    def upload(self, rel: str, source: Path | bytes, digest: FileDigest,
               sent: Callable[[int], None] = uncounted) -> None:
        target = {"Bucket": self.bucket, "Key": self._key(rel)}
        with open_source(source) as handle:
            if not digest.multipart:
                body = _read_checked(handle, digest, 0, rel)
                checksum = self._checksum_args(digest.part_digests[0])
                self.fs.call_s3("put_object", Body=body, Metadata={METADATA_KEY: digest.sha256}, **target, **checksum)
                sent(len(body))
                return

            def send_part(upload: dict[str, Any], index: int) -> str:
                body = _read_checked(handle, digest, index, rel)
                checksum = self._checksum_args(digest.part_digests[index])
                done = self.fs.call_s3("upload_part", Body=body, **upload, **checksum)
                sent(len(body))
                return done["ETag"]

            self._multipart(target, digest, send_part)

    def copy(self, source: str, rel: str, digest: FileDigest) -> None:
        """CopyObject, or for an object that an upload sends in parts UploadPartCopy of the same parts: the copy's
        checksums are those an upload would give it, and the server computes them from the copied bytes."""
        target = {"Bucket": self.bucket, "Key": self._key(rel)}
        origin = {"Bucket": self.bucket, "Key": self._key(source)}
        if not digest.multipart:
            algorithm = {"ChecksumAlgorithm": "SHA256"} if self.server_checksum else {}
            self.fs.call_s3("copy_object", CopySource=origin, MetadataDirective="REPLACE",
                            Metadata={METADATA_KEY: digest.sha256}, **target, **algorithm)
            return

        def copy_part(upload: dict[str, Any], index: int) -> str:
            first = index * digest.part_size
            last = min(first + digest.part_size, digest.size) - 1
            done = self.fs.call_s3("upload_part_copy", CopySource=origin, CopySourceRange=f"bytes={first}-{last}",
                                   **upload)
            return done["CopyPartResult"]["ETag"]

        self._multipart(target, digest, copy_part)

    def _multipart(self, target: dict[str, str], digest: FileDigest,
                   make_part: Callable[[dict[str, Any], int], str]) -> None:
        """A multipart object of `digest`'s parts, each made by make_part(request arguments, index) -> its ETag."""
        algorithm = {"ChecksumAlgorithm": "SHA256"} if self.server_checksum else {}
        upload_id = self.fs.call_s3(
            "create_multipart_upload", Metadata={METADATA_KEY: digest.sha256}, **target, **algorithm
        )["UploadId"]
        try:
            parts = []
            for index, part_digest in enumerate(digest.part_digests):
                etag = make_part({"UploadId": upload_id, "PartNumber": index + 1, **target}, index)
                part = {"ETag": etag, "PartNumber": index + 1}
                if self.server_checksum:  # the server refuses to complete an object whose parts hold other bytes
                    part["ChecksumSHA256"] = _b64(part_digest)
                parts.append(part)
            self.fs.call_s3("complete_multipart_upload", UploadId=upload_id, MultipartUpload={"Parts": parts}, **target)
        except BaseException:
            # An unfinished multipart upload is invisible but billed; do not leave it behind.
            with contextlib.suppress(Exception):
                self.fs.call_s3("abort_multipart_upload", UploadId=upload_id, **target)
            raise

    def _checksum_args(self, part_digest: bytes) -> dict[str, str]:
        if not self.server_checksum:
            return {}
        return {"ChecksumAlgorithm": "SHA256", "ChecksumSHA256": _b64(part_digest)}

    def delete(self, rel: str) -> None:
        self.fs.call_s3("delete_object", Bucket=self.bucket, Key=self._key(rel))


def _read_checked(handle: BinaryIO, digest: FileDigest, index: int, rel: str) -> bytes:
    """Read part `index` and prove it is the part that was hashed, so what we send is what SHA256SUMS promises."""
    body = handle.read(digest.part_size)
    if hashlib.sha256(body).digest() != digest.part_digests[index]:
        raise CacheIntegrityError(f"{rel}: part {index + 1} changed after it was hashed; rerun publish")
    return body


def _server_checksum_problem(reported: str | None, digest: FileDigest) -> str | None:
    if reported is None:
        return (
            "checksum missing: the server holds no SHA-256 checksum for it (not written by publish; for a backend "
            "without checksums pass --no-server-checksum)"
        )
    # AWS writes a multipart object's checksum as "<base64>-<parts>"; some compatible servers omit the suffix.
    value, _, parts = reported.partition("-")
    if parts and int(parts) != len(digest.part_digests):
        return f"part size differs (uploaded in {parts} parts, expected {len(digest.part_digests)})"
    if value != digest.server_checksum():
        return f"checksum differs (server SHA-256 {value}, expected {digest.server_checksum()})"
    return None

"""Large payloads by claim check: the body in an S3-compatible blob store, a pointer on the
queue, in the Amazon SQS Extended Client's format (see pointer.py).

- `pointer`: the format (no I/O);
- `blobs`: an S3-compatible store reached with botocore (Amazon S3, moto, MinIO, or the
  Conveyor server's embedded store);
- `resolver`: the worker's side: pointer in, the real body out, the blob deleted after;
- `offload`: the producer's side, for `conveyor message send` and apps (`Offloader`).

The embedded store the Conveyor server serves over a local directory is a server part:
conveyor/server/s3subset.py.
"""

from conveyor.payloads.blobs import BlobError, BlobMissing, BlobSettings, BlobStore
from conveyor.payloads.offload import Offloader, OffloadError
from conveyor.payloads.pointer import Pointer

__all__ = ["BlobError", "BlobMissing", "BlobSettings", "BlobStore", "OffloadError",
           "Offloader", "Pointer"]

"""`cdc-server`: the capture process (see ``capture.main``)."""

# before any module of this package loads gRPC: ``cdc`` sets how gRPC handles fork()
import cdc  # noqa: F401

"""The HTTP front of a cdc-server: /metrics, a read-mostly JSON API and the web console.

One listener per server (``--http-addr``, ``front.HttpFront``); ``--metrics-addr``
keeps serving /metrics alone (``capture.metrics_endpoint``). Every route names
the operation it does and is checked by ``capture.access`` (``router``): the
JSON API's routes are the admin API's gRPC methods, served by its own
servicers (``grpc_bridge``) and the shared readers (``reader``, ``views``); the
console (``assets``, ``console/``) is plain HTML and ES modules polling that API.
"""

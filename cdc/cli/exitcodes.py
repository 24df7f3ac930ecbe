"""cdcctl's exit codes, documented in README.md ("Exit codes")."""

OK = 0
FAILED = 1  # the request was valid but the operation failed (server error, service failure)
BAD_INPUT = 2  # usage error, malformed URI or config, invalid argument: nothing was changed
UNAVAILABLE = 3  # a server, etcd or database could not be reached: nothing was changed
UNAUTHORIZED = 4  # the server refused the call: missing or wrong bearer token, or not allowed

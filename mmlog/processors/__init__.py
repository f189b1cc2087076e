"""The data plane: processor processes, each an event loop over its connections."""

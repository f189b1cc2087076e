"""The broker's web console (placeholder until the console's foundation is merged)."""

"""The schema types' error, in a module of its own so that each type's module can raise it without importing
the package's entry point (which imports them: that would be a cycle)."""


class InvalidSchema(ValueError):
    """A schema that does not parse, or names a reference it was not given."""

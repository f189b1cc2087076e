"""The schema package's error, apart so that each schema type's module can raise it without importing the
package's entry point (which imports them)."""


class InvalidSchema(ValueError):
    """A schema that does not parse, or names a reference it was not given."""

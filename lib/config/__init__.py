"""The configuration: Kconfig loading with strict checks, command-line overrides,
rules across symbols, renamed symbols, the menu wrapper, and the typed RunConfig
every script reads. Its options are the top-level Kconfig's; this package only
reads them.
"""

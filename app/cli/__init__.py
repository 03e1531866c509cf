"""The command line: ``teacache-studio [subcommand]``. Without a subcommand the window opens."""

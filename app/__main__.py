from __future__ import annotations

import sys


def main() -> int:
    from app.compile_cache import use_private_compile_cache

    use_private_compile_cache()  # before MLX compiles: the window and the command line alike
    from app.cli.main import main as cli_main

    return cli_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())

"""`python -m gpumemtrace ...`: the same as the `gpumemtrace` command."""
from .launcher import main

if __name__ == "__main__":
    main()

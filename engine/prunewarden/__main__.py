"""``python -m prunewarden``: the ``prunewarden`` command, for an environment without its script
on the PATH."""

from prunewarden.cli import main

if __name__ == "__main__":
    main()

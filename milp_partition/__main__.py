import sys

from milp_partition.cli.dispatch import main

if __name__ == "__main__":  # not when a worker's process imports the launcher's main module (run/launch.py)
    sys.exit(main())

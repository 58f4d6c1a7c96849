import sys

from milp_partition.cli.dispatch import main

sys.exit(main())

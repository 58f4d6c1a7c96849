import sys

from milp_partition.cli import main

sys.exit(main())

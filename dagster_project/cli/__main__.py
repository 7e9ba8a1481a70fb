import sys

from dagster_project.cli import main

sys.exit(main())

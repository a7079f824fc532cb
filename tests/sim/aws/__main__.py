"""`python3 tests/sim/aws [options]` runs the EC2 + S3 + Service Quotas
simulator (awssim.py); `--help` lists the options."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import awssim  # noqa: E402

sys.exit(awssim.main())

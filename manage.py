#!/usr/bin/env python
import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hermes_web.settings")
    from django.core.management import execute_from_command_line

    from hermes_web.config import ConfigError

    try:
        execute_from_command_line(sys.argv)
    except ConfigError as exc:
        print(f"hermes: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()

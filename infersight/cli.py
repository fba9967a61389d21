"""The ``infersight`` command: one entry point, a subcommand per job."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from pathlib import Path

from infersight import __version__
from infersight.config import Config, ConfigError, load_config, parse_config

log = logging.getLogger("infersight")


def _config(args: argparse.Namespace) -> Config:
    return load_config(args.config)


def cmd_check_config(args: argparse.Namespace) -> int:
    load_config(args.file)
    print(f"{args.file}: OK")
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    from infersight.generate import write_all

    written = write_all(_config(args), Path(args.out))
    for path in written:
        print(f"wrote {path}")
    if not written:
        print("all generated files are up to date")
    return 0


def cmd_exporter(args: argparse.Namespace) -> int:
    from exporters.server import Sidecar

    config = _config(args)
    overrides = {}
    if args.listen_address:
        overrides["listen_address"] = args.listen_address
    if args.port is not None:
        overrides["port"] = args.port
    if overrides:  # validated like the file, so a bad --port is named the same way
        data = config.model_dump()
        data["exporter"].update(overrides)
        config = parse_config(data, "command line")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        sidecar = Sidecar(config)
        sidecar.start()
    except (ValueError, OSError) as exc:  # public address without a token, unreadable token file, port in use
        print(f"infersight exporter: {exc}", file=sys.stderr)
        return 2
    print(f"infersight exporter listening on http://{config.exporter.listen_address}:{sidecar.port}", flush=True)
    stop.wait()
    sidecar.stop()
    return 0


def cmd_stack(args: argparse.Namespace) -> int:
    from infersight.stack import run_stack_command

    return run_stack_command(args)


def cmd_simulate(args: argparse.Namespace) -> int:
    from infersight.simulate.command import run_simulate

    return run_simulate(args)


def cmd_demo(args: argparse.Namespace) -> int:
    from infersight.demo import run_demo

    return run_demo(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="infersight", description=__doc__)
    parser.add_argument("--version", action="version", version=f"infersight {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def with_config(p: argparse.ArgumentParser) -> None:
        p.add_argument("-c", "--config", help="infersight.yaml (default: the embedded defaults)")

    p = sub.add_parser("check-config", help="validate an infersight.yaml and report every bad field")
    p.add_argument("file", help="the configuration file to check")
    p.set_defaults(func=cmd_check_config)

    p = sub.add_parser("generate", help="write rules, dashboards and deploy configs from the config")
    with_config(p)
    p.add_argument("-o", "--out", default=".", help="repository root to write into (default: .)")
    p.set_defaults(func=cmd_generate)

    p = sub.add_parser("exporter", help="run the sidecar (/metrics, /healthz)")
    with_config(p)
    p.add_argument("--listen-address", help="override exporter.listen_address")
    p.add_argument("--port", type=int, help="override exporter.port")
    p.set_defaults(func=cmd_exporter)

    p = sub.add_parser("stack", help="run the monitoring stack from local binaries (no Docker)")
    with_config(p)
    from infersight.stack import add_stack_arguments

    add_stack_arguments(p)
    p.set_defaults(func=cmd_stack)

    p = sub.add_parser("simulate", help="serve synthetic vLLM /metrics, GPUs and business events from scenarios")
    with_config(p)
    from infersight.simulate.command import add_simulate_arguments

    add_simulate_arguments(p)
    p.set_defaults(func=cmd_simulate)

    p = sub.add_parser("demo", help="simulator + native monitoring stack: watch scenarios page (no GPU, no Docker)")
    from infersight.demo import add_demo_arguments

    add_demo_arguments(p)
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        return args.func(args)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

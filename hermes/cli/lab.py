"""The offline labs: ``hermes lab flow`` (a balancer's serial reference on a processor graph), ``hermes lab gossip``
(Grapevine on object loads) and ``hermes lab bench`` (the published iteration/time figures)."""

from __future__ import annotations

from hermes.cli.common import error, parse_params

__all__ = ["cmd_flow", "cmd_gossip", "cmd_flow_bench"]


def cmd_flow(args) -> int:
    import json

    from hermes.errors import HermesError
    from hermes.lab.flow_lab import flow_lab, format_flow_report

    try:
        params = parse_params(args.params)
        result = flow_lab(args.graph, args.capacities, args.weights, args.loads, args.algorithm, tol=args.tol,
                          params=params)
    except HermesError as err:
        return error(str(err))
    print(json.dumps(result) if args.json else format_flow_report(result))
    return 0


def cmd_gossip(args) -> int:
    import json

    from hermes.errors import HermesError
    from hermes.lab.gossip import format_gossip_report, gossip_lab

    try:
        result = gossip_lab(args.ranks, args.objects, args.mapped_ranks, args.loads, args.iterations, args.rounds,
                            args.fanout, args.threshold, args.criterion, args.seed, args.source_load,
                            write_trace=args.write_trace)
    except HermesError as err:
        return error(str(err))
    print(json.dumps(result) if args.json else format_gossip_report(result))
    return 0


def cmd_flow_bench(args) -> int:
    from hermes.errors import HermesError
    from hermes.lab.bench import flow_bench

    fams = ("diffusion", "polynomial", "table10.1") if args.family == "all" else (args.family,)
    try:
        paths = flow_bench(args.out, quick=args.quick, families=fams, profile=args.profile)
    except HermesError as err:
        return error(str(err))
    for path in paths:
        print(path)
    return 0

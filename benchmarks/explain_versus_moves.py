"""Why a `bench_gemm_options.py --versus` A / B moves the picks it moves on this machine: for named
shapes, the library's pick and the trial's (a calibration file and model switches), with the
device facts the ranking reads (name, SM count, resident clusters, the calibration), so a CPU and
a GPU machine can be compared line by line.

    python benchmarks/explain_versus_moves.py --versus mgpu_lab/kernels/gemm/h100_measured.json \
        --offer three_consumers --shapes 9x18944x4096,2077x6136x616
"""

from __future__ import annotations

import argparse

from bench_gemm_options import model_pick, name_of, versus_pick
from common import parse_shapes
from gemm_sweep import Problem

from mgpu_lab.kernels.gemm import configs, model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versus", required=True, help="the trial's calibration file (JSON of model constants)")
    parser.add_argument("--offer", default="", help="the trial's model switches, comma-separated")
    parser.add_argument("--shapes", required=True, help="MxNxK[:nt|:nn],... (B (n, k) unless :nn)")
    args = parser.parse_args()
    offer = tuple(filter(None, args.offer.split(",")))
    device = configs.device_name()
    print(f"device {device}, sms {configs.device_sms()}, clusters {configs.device_clusters()}, "
          f"calibration {model.calibration_of(device)}, switches {','.join(model.switches_on())}")
    trial_constants = model.constants_from_file(args.versus)
    same = trial_constants == model.constants_for(device)
    print(f"trial constants {'equal' if same else 'differ from'} the library's")
    for m, n, k, transpose_b in parse_shapes(args.shapes):
        p = Problem(m, n, k, transpose_b, "given")
        library, trial = model_pick(p), versus_pick(p, trial_constants, offer)
        print(f"{p.key:18s} library {name_of(library):56s} trial {name_of(trial)}")


if __name__ == "__main__":
    main()

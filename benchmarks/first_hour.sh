#!/usr/bin/env bash
# A researcher's first hour, replayed on a fresh clone: each step prints what a newcomer meets and how long it took.
#
#   benchmarks/first_hour.sh [CLONE_DIR]     (default /tmp/hermes-first-hour; needs git, python3 >= 3.11, the registries)
#
# Steps: clone, `make run` (fresh .venv from the lock), the CLI's start-up CPU, the set-up progress lines, the drawing's
# share of a CFD run's wall time, `pip install .` in a separate fresh venv running the quickstart from elsewhere, a 3-D
# hex mesh of one's own run and drawn, a multi-constraint Chaco graph refused then used, max_level respected under
# refinement, the README's length. The output is the record; nothing is asserted here (the test suite asserts).
set -uo pipefail
SRC="$(cd "$(dirname "$0")/.." && pwd)"
DIR="${1:-/tmp/hermes-first-hour}"
WORK="$DIR-work"
rm -rf "$DIR" "$WORK" && mkdir -p "$WORK"
step() { printf '\n== %s (%s)\n' "$1" "$(date -u +%H:%M:%S)"; }
timed() { /usr/bin/time -f "   [%e s wall, %U+%S s CPU, exit %x]" "$@"; }

step "clone"
git clone -q "$SRC" "$DIR" && git -C "$DIR" log --oneline -1
cd "$DIR" || exit 1

step "README: $(wc -l < README.md) lines"

step "make run (a fresh .venv from the lock, then the quickstart)"
timed make run 2>&1 | grep -v "^\s*$" | tail -25
H=.venv/bin/hermes

step "start-up CPU: hermes --version, --help, run --help, import hermes (min of 3)"
for cmd in "$H --version" "$H --help" "$H run --help" ".venv/bin/python -c 'import hermes'"; do
  best=""
  for _ in 1 2 3; do
    t=$( { /usr/bin/time -f "%U %S" bash -c "$cmd >/dev/null" ; } 2>&1 | tail -1 | awk '{print $1+$2}')
    best=$(printf '%s\n%s\n' "$best" "$t" | grep . | sort -g | head -1)
  done
  printf '   %-40s %s s CPU\n' "$cmd" "$best"
done

step "a CFD run with pictures: set-up lines, phases, drawing (refine-airfoil, 8 processors)"
timed $H run scenarios/refine-airfoil.yaml --out "$WORK/airfoil" 2>&1 | tee "$WORK/airfoil.log" | grep -v "^drawn partition" | tail -25
python3 - "$WORK/airfoil.log" <<'EOF'
import re, sys
log = open(sys.argv[1]).read()
walls = [float(w) for w in re.findall(r"^phase \d+/\d+: .*\| wall ([\d.]+) s", log, re.M)]
drawn = re.search(r"^drawn: (\d+) pictures.* in ([\d.]+) s", log, re.M)  # VTU files included
if walls and drawn:
    per_phase = walls[-1] / len(walls)
    per_picture = float(drawn.group(2)) / int(drawn.group(1))
    print(f"   phases: {len(walls)} in {walls[-1]:.1f} s wall ({per_phase:.2f} s each); drawing: {drawn.group(1)} "
          f"pictures in {drawn.group(2)} s ({per_picture:.2f} s each) = {100 * per_picture / per_phase:.0f} % of a phase")
EOF

step "pip install . in a separate fresh venv, quickstart run from another directory"
python3 -m venv "$WORK/libvenv"
timed "$WORK/libvenv/bin/pip" install -q . 2>&1 | tail -3
(cd "$WORK" && timed "$WORK/libvenv/bin/hermes" run --out "$WORK/lib-quickstart" --quiet 2>&1 | tail -3)
"$WORK/libvenv/bin/python" -c "
import hermes; r = hermes.load_run('$WORK/lib-quickstart'); ph, ranks = r.to_pandas()
print('   library install: total_time', r['total_time'], '| to_pandas:', ph.shape, ranks.shape)"

step "a 3-D hex mesh of one's own (8x8x8), 8 processors, drawn and written to VTU"
.venv/bin/python - "$WORK/cube.vtu" <<'EOF'
import sys, numpy as np, meshio
n = 8
g = np.arange(n + 1)
pts = np.array([(x, y, z) for z in g for y in g for x in g], float)
idx = lambda x, y, z: x + (n + 1) * (y + (n + 1) * z)
hexes = [[idx(x, y, z), idx(x+1, y, z), idx(x+1, y+1, z), idx(x, y+1, z),
          idx(x, y, z+1), idx(x+1, y, z+1), idx(x+1, y+1, z+1), idx(x, y+1, z+1)]
         for z in range(n) for y in range(n) for x in range(n)]
meshio.write(sys.argv[1], meshio.Mesh(pts, [("hexahedron", np.array(hexes))]))
EOF
timed $H run --set mesh.file="$WORK/cube.vtu" --set processors=8 --set platform.capacities=homo \
    --set output.vtu=true --out "$WORK/cube" 2>&1 | grep -v "^drawn partition" | tail -6
.venv/bin/python -c "
import meshio; m = meshio.read('$WORK/cube/vtu/phase-001.vtu')
print('   VTU:', m.points.shape[1], 'coordinates, z from', m.points[:, 2].min(), 'to', m.points[:, 2].max(), '|',
      [(c.type, len(c.data)) for c in m.cells])"
echo "   picture: $WORK/cube/partition-001.png"
echo "   refinement of the hex mesh:"
$H run --set mesh.file="$WORK/cube.vtu" --set processors=8 --set platform.capacities=homo \
    --set adaptation.kind=refine --out "$WORK/cube-refine" 2>&1 | sed 's/^/   /'; echo "   exit ${PIPESTATUS[0]}"

step "a multi-constraint Chaco graph (two weights per vertex)"
.venv/bin/python - "$WORK/multi.graph" <<'EOF'
import sys
n = 30                                  # a 30x30 grid graph, weights (1, i mod 3)
lines, m = [], 0
for i in range(n * n):
    r, c = divmod(i, n)
    nb = [j for j in (i - n if r else None, i + n if r < n - 1 else None, i - 1 if c else None,
                      i + 1 if c < n - 1 else None) if j is not None]
    m += len(nb)
    lines.append(" ".join([str(1), str(i % 3)] + [str(j + 1) for j in nb]))
open(sys.argv[1], "w").write(f"{n * n} {m // 2} 010 2\n" + "\n".join(lines) + "\n")
EOF
$H run --set mesh.file="$WORK/multi.graph" --set adaptation.phases=2 --out "$WORK/multi" 2>&1 | sed 's/^/   /'
echo "   exit ${PIPESTATUS[0]}; with mesh.constraint=sum:"
$H run --set mesh.file="$WORK/multi.graph" --set mesh.constraint=sum --set adaptation.phases=2 --no-pictures \
    --out "$WORK/multi" 2>&1 | tail -2 | sed 's/^/   /'
.venv/bin/python -c "
import json; s = json.load(open('$WORK/multi/summary.json')); print('   weight_initial', s['weight_initial'], '(900 + 0+1+2 per 3 vertices = 1800)')"

step "max_level is a cap (refine-lshape, a slower front, no coarsening, 6 phases; 58ba91b reached 3 and 4)"
for ml in 2 3; do
  $H run scenarios/refine-lshape.yaml --set adaptation.max_level=$ml --set adaptation.phases=6 \
      --set adaptation.coarsen=false --set adaptation.region.speed=0.1 --no-pictures --quiet --out "$WORK/cap$ml"
  .venv/bin/python -c "
import glob, meshio
levels = [int(meshio.read(f).cell_data['level'][0].max()) for f in sorted(glob.glob('$WORK/cap$ml/vtu/phase-*.vtu'))]
print('   max_level $ml: highest level after each phase', levels)"
done

step "a rank's start-up CPU (benchmarks/startup.py)"
.venv/bin/python -m benchmarks.startup 2>&1 | tail -8

step "done"

#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The layering rule of src/ (src/README.md), checked from the #include lines.

    util < device < volume < selftest, clone < stream < settings < pool
         < metrics < manager < daemon < main

A file may include headers of its own directory and of lower layers only;
selftest/ and clone/ are one layer and do not include each other.
admin-protocol.h and api-endpoint.h are plain definitions that any layer may
include. The command (cli/) uses util, device, volume, selftest, stream, settings,
pool/mount.h, pool/mount-users.h and the definitions, never manager/ or daemon/. No header may
reach itself through its includes.

    check-layering.py SRC_DIR    report every crossing and circle; exit 1 if any
    check-layering.py --control  run the check on a small tree with one crossing
                                 of each kind and a circle: each must be reported
"""
import os
import re
import sys
import tempfile

RANK = {
    'util': 0,
    'device': 1,
    'volume': 2,
    'selftest': 3,
    'clone': 3,
    'stream': 4,
    'settings': 5,
    'pool': 6,
    'metrics': 7,
    'manager': 8,
    'daemon': 9,
    'main': 10,
}
DEFINITIONS = {'admin-protocol.h', 'api-endpoint.h'}
CLI_ALLOWED_LAYERS = {'util', 'device', 'volume', 'selftest', 'stream', 'settings'}
CLI_ALLOWED_FILES = {'pool/mount.h', 'pool/mount-users.h', 'clone/clone-file.h'}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_of(relpath):
    """The layer of a file given relative to src/: its directory, or for the
    top-level files their own name (settings.c is layer 'settings')."""
    if '/' in relpath:
        return relpath.split('/', 1)[0]
    if relpath in DEFINITIONS or relpath == 'api-endpoint.c':
        return 'definitions'
    stem = relpath.rsplit('.', 1)[0]
    return stem


def allowed(src, dst):
    """Whether file @src (relative to src/) may include header @dst."""
    ls, ld = layer_of(src), layer_of(dst)
    if ld == 'definitions' or ls == ld:
        return True
    if ls == 'definitions':
        return ld == 'util'
    if ls == 'cli':
        return ld in CLI_ALLOWED_LAYERS or dst in CLI_ALLOWED_FILES
    if ld == 'cli':
        return ls == 'main'
    if ls not in RANK or ld not in RANK:
        return False
    return RANK[ld] < RANK[ls]


def scan(root):
    includes = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            if not name.endswith(('.c', '.h')):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            with open(path, encoding='utf-8') as f:
                includes[rel] = INCLUDE.findall(f.read())
    return includes


def find_circles(includes):
    """Header circles, each reported once as the path that closes it."""
    graph = {f: [d for d in deps if d in includes] for f, deps in includes.items() if f.endswith('.h')}
    circles, state = [], {}

    def visit(node, stack):
        state[node] = 'open'
        stack.append(node)
        for nxt in graph.get(node, []):
            if state.get(nxt) == 'open':
                circles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = 'done'

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    return circles


def check(root):
    includes = scan(root)
    problems = []
    for src in sorted(includes):
        for dst in includes[src]:
            if dst not in includes:
                # Only names relative to src/ are ours: a bare "x.h" would be
                # found next to the includer and hide its layer.
                problems.append('%s: includes "%s", which is not a path under src/' % (src, dst))
            elif not allowed(src, dst):
                problems.append('%s (%s) includes %s (%s): against the layering rule' %
                                (src, layer_of(src), dst, layer_of(dst)))
    for circle in find_circles(includes):
        problems.append('include circle: ' + ' -> '.join(circle))
    return len(includes), problems


def control():
    tree = {
        'util/a.h': '',
        'util/bad.h': '#include "pool/p.h"\n',             # util reaching up
        'pool/p.h': '#include "util/a.h"\n',
        'manager/m.h': '#include "pool/p.h"\n',
        'pool/up.c': '#include "manager/m.h"\n',          # pool reaching up
        'clone/c.h': '#include "selftest/s.h"\n',         # one layer, two directories
        'selftest/s.h': '',
        'cli/cmd.c': '#include "manager/m.h"\n',          # the command using the manager
        'metrics/x.h': '#include "metrics/y.h"\n',        # circle
        'metrics/y.h': '#include "metrics/x.h"\n',
        'daemon/bare.c': '#include "p.h"\n',              # not path-qualified
    }
    expected = ['util/bad.h', 'pool/up.c', 'clone/c.h', 'cli/cmd.c', 'include circle', 'daemon/bare.c']
    with tempfile.TemporaryDirectory() as root:
        for rel, text in tree.items():
            os.makedirs(os.path.join(root, os.path.dirname(rel)), exist_ok=True)
            with open(os.path.join(root, rel), 'w') as f:
                f.write(text)
        _, problems = check(root)
    missed = [e for e in expected if not any(p.startswith(e) for p in problems)]
    for p in problems:
        print('control: reported: ' + p)
    if missed or len(problems) != len(expected):
        print('control: FAILED: expected %d reports (%s), missed %s' % (len(expected), ', '.join(expected), missed))
        return 1
    print('control: every planted crossing and the circle were reported')
    return 0


def main(argv):
    if argv[1:] == ['--control']:
        return control()
    if len(argv) != 2:
        print(__doc__)
        return 2
    n, problems = check(argv[1])
    for p in problems:
        print(p)
    print('%d files checked, %d problems' % (n, len(problems)))
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))

#!/usr/bin/env python3
"""Check docs/architecture.md's dependency table against the #includes.

Every quoted #include in a component folder is resolved to the folder that
holds the header; a component that includes a header of another component
depends on it. The table in docs/architecture.md (between the markers
"<!-- deps:begin -->" and "<!-- deps:end -->") must list exactly those
dependencies: one that the code has and the table lacks is an undeclared
dependency; one the table lists and the code no longer has is a stale promise.
The dependencies must also point one way: a folder that reaches itself through
them (a includes b, b includes a, or a longer loop) is reported with the loop.
Exit 0 when they agree and there is no loop, 1 (with what is wrong) otherwise.

    python3 scripts/check-deps.py [REPO_ROOT]
"""
import os
import re
import sys

FOLDERS = ['include', 'shm', 'client', 'triggers', 'wire', 'daemon', 'select', 'estimate',
           'adaptive', 'weave', 'store', 'ui', 'agent', 'coordinator', 'tools', 'examples']
INCLUDE = re.compile(r'\s*#\s*include\s*"([^"]+)"')


def headers_by_name(root):
    where = {}
    for f in FOLDERS:
        for d, _, files in os.walk(os.path.join(root, f)):
            for fn in files:
                if fn.endswith(('.h', '.hpp')):
                    where.setdefault(fn, set()).add(f)
    return where


def code_deps(root):
    where = headers_by_name(root)
    deps = {f: set() for f in FOLDERS}
    for f in FOLDERS:
        for d, _, files in os.walk(os.path.join(root, f)):
            for fn in files:
                if not fn.endswith(('.c', '.h', '.cpp', '.hpp')):
                    continue
                with open(os.path.join(d, fn), errors='replace') as fh:
                    for line in fh:
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        inc = m.group(1)
                        top = inc.split('/')[0] if '/' in inc else None
                        if top == 'retrace':
                            owner = {'include'}
                        elif top in FOLDERS:
                            owner = {top}
                        elif os.path.exists(os.path.join(d, inc)):
                            owner = {f}
                        else:
                            owner = where.get(os.path.basename(inc), set())
                        if f in owner:
                            continue
                        deps[f] |= owner
    return deps


def table_deps(root):
    text = open(os.path.join(root, 'docs', 'architecture.md')).read()
    block = text.split('<!-- deps:begin -->')[1].split('<!-- deps:end -->')[0]
    deps = {}
    for line in block.splitlines():
        cells = [c.strip() for c in line.strip().strip('|').split('|')]
        if len(cells) < 2 or not cells[0].startswith('`'):
            continue
        name = cells[0].strip('`').rstrip('/')
        used = set(re.findall(r'`([a-z]+)/?`', cells[1]))
        deps[name] = used
    return deps


def find_loop(deps):
    """A list of folders [a, b, ..., a] that include each other in a loop, or None."""
    state = {}

    def visit(f, path):
        state[f] = 'open'
        for d in sorted(deps.get(f, ())):
            if state.get(d) == 'open':
                return path[path.index(d):] + [d]
            if d not in state:
                loop = visit(d, path + [d])
                if loop:
                    return loop
        state[f] = 'done'
        return None

    for f in sorted(deps):
        if f not in state:
            loop = visit(f, [f])
            if loop:
                return loop
    return None


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), '..')
    code, table = code_deps(root), table_deps(root)
    bad = 0
    for f in FOLDERS:
        if f not in table:
            print(f'check-deps: {f}/ is not in the table of docs/architecture.md')
            bad = 1
            continue
        for d in sorted(code[f] - table[f]):
            print(f'check-deps: {f}/ includes {d}/ but the table does not say so')
            bad = 1
        for d in sorted(table[f] - code[f]):
            print(f'check-deps: the table says {f}/ uses {d}/ but no #include does')
            bad = 1
    loop = find_loop(code)
    if loop:
        print('check-deps: the folders include each other in a loop: ' +
              ' -> '.join(f + '/' for f in loop))
        bad = 1
    print('check-deps: the table matches the includes, no loops' if not bad else
          'check-deps: MISMATCH')
    return bad


if __name__ == '__main__':
    sys.exit(main())

#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Prints the benchmark table (markdown) from the JSON lines run.sh wrote."""
import json
import os
import sys


def load(path):
    out = {}
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith('{'):
                r = json.loads(line)
                key = r['case'] + (f" {r['bytes']} B" if 'bytes' in r and not r['case'].startswith('TCP') else '')
                out[key] = r
    return out


def fmt_size(n):
    for unit, k in (('GiB', 1 << 30), ('MiB', 1 << 20), ('KiB', 1 << 10)):
        if n >= k:
            return f'{n // k} {unit}'
    return f'{n} B'


def main():
    d = sys.argv[1]
    local, tcp, unix, raw = (load(os.path.join(d, f)) for f in
                             ('bench-local.jsonl', 'bench-lupine-tcp.jsonl', 'bench-lupine-unix.jsonl', 'bench-tcp.jsonl'))
    ping = raw.get('TCP 64 B ping-pong', {})
    stream = raw.get('TCP single stream', {})
    print(f"transport ceiling: TCP 64 B ping-pong p50 {ping.get('p50_us', 0):.1f} us, p99 {ping.get('p99_us', 0):.1f} us;"
          f" one TCP stream {stream.get('gbps', 0):.2f} GB/s\n")
    print('| case | local | lupine TCP | ratio | lupine UNIX | ratio |')
    print('|---|---|---|---|---|---|')
    for key, rl in (tcp.items() if not local else local.items()):
        lt, lu, lo = tcp.get(key), unix.get(key), local.get(key)
        name = key
        if 'bytes' in (lt or {}):
            name = f"{lt['case']} {fmt_size(lt['bytes'])}"

        def val(r):
            if not r:
                return None, '-'
            if 'p50_us' in r:
                return r['p50_us'], f"p50 {r['p50_us']:.1f} / p99 {r['p99_us']:.1f} us"
            if 'per_s' in r:
                return r['per_s'], f"{r['per_s'] / 1e3:.0f}k/s" if r['per_s'] >= 1e4 else f"{r['per_s']:.0f}/s"
            return r['gbps'], f"{r['gbps']:.2f} GB/s"

        vl, sl = val(lo)
        vt, st = val(lt)
        vu, su = val(lu)

        def ratio(v):
            if v is None or not vl:
                return '-'
            return f'{v / vl:.2f}x'
        print(f'| {name} | {sl} | {st} | {ratio(vt)} | {su} | {ratio(vu)} |')
    # the targets, stated against their own baselines
    print()
    lt = tcp.get('cuMemGetInfo')
    if lt and ping:
        print(f"sync call p50 over TCP minus TCP ping-pong p50: {lt['p50_us'] - ping['p50_us']:+.1f} us (target <= +3 us)")
    for k in ('HtoD pageable 1073741824 B', 'DtoH pageable 1073741824 B', 'HtoD pageable 67108864 B', 'DtoH pageable 67108864 B'):
        if k in tcp and stream:
            print(f"{k.replace(' 1073741824 B', ' 1 GiB').replace(' 67108864 B', ' 64 MiB')} over TCP vs one TCP stream:"
                  f" {tcp[k]['gbps'] / stream['gbps']:.2f}x (target >= 0.9x)")
    if 'launch throughput' in tcp and 'launch throughput' in local:
        print(f"launch throughput over TCP vs local: {tcp['launch throughput']['per_s'] / local['launch throughput']['per_s']:.2f}x (target >= 0.9x)")
    k = 'graph of 200 kernels'
    if k in tcp and k in local:
        print(f"{k} launches over TCP vs local: {tcp[k]['per_s'] / local[k]['per_s']:.2f}x (target >= 0.9x)")
    k = 'cuMemAllocAsync+cuMemFreeAsync'
    if k in tcp and k in local:
        print(f"{k} pairs over TCP vs local: {tcp[k]['per_s'] / local[k]['per_s']:.2f}x (target >= 0.5x)")
    # TLS 1.3 (with a token) against plaintext TCP, both through lupine
    tls = load(os.path.join(d, 'bench-lupine-tls.jsonl'))
    if tls:
        print()
        print('| case | lupine TCP | lupine TLS | TLS / TCP |')
        print('|---|---|---|---|')
        for key, rt in tcp.items():
            rs = tls.get(key)
            if not rs:
                continue
            name = f"{rt['case']} {fmt_size(rt['bytes'])}" if 'bytes' in rt else key
            for f, unit, scale in (('gbps', 'GB/s', 1), ('per_s', 'k/s', 1e-3), ('p50_us', 'us p50', 1)):
                if f in rt and f in rs and rt[f] and rs[f]:  # a quick run's tiny copies may round to 0
                    r = rs[f] / rt[f] if f != 'p50_us' else rt[f] / rs[f]
                    print(f"| {name} | {rt[f] * scale:.2f} {unit} | {rs[f] * scale:.2f} {unit} | {r:.2f}x |")
                    break
        for k in ('HtoD pageable 1073741824 B', 'DtoH pageable 1073741824 B', 'HtoD pinned 1073741824 B',
                  'DtoH pinned 1073741824 B'):
            if k in tcp and k in tls:
                print(f"{k.replace(' 1073741824 B', ' 1 GiB')} over TLS vs plaintext TCP:"
                      f" {tls[k]['gbps'] / tcp[k]['gbps']:.2f}x (target >= 0.8x)")


if __name__ == '__main__':
    main()

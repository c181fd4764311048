#!/usr/bin/env python3
"""Draws committed placements per second against fleet size as an SVG line chart.

Reads fleet_scale --json outputs named on the command line (one per fleet size) and writes the
SVG to stdout. Standard library only, so it runs with any python3:

    for n in 1024 2560 5120 10240; do build/bench/fleet_scale --nodes $n --no-million --json > /tmp/f$n.json; done
    bench/plot_fleet.py /tmp/f*.json > docs/img/fleet_placements.svg
"""
import json
import sys


def main(paths):
    rows = sorted((json.load(open(p)) for p in paths), key=lambda r: r["nodes"])
    if not rows:
        sys.exit("plot_fleet: name the fleet_scale --json files to plot")
    width, height, left, right, top, bottom = 640, 360, 70, 20, 30, 50
    max_x = max(r["nodes"] for r in rows)
    series = [("1-GPU jobs", "placements_per_s", "#1f77b4"), ("2-node x 8-GPU gangs", "gang_placements_per_s", "#d62728")]
    max_y = max(r[key] for _, key, _ in series for r in rows) * 1.15

    def px(x):
        return left + (width - left - right) * x / max_x

    def py(y):
        return height - bottom - (height - top - bottom) * y / max_y

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2}" y="18" text-anchor="middle" font-size="14">Committed placements per second vs fleet size (bench/fleet_scale)</text>',
           f'<line x1="{left}" y1="{height - bottom}" x2="{width - right}" y2="{height - bottom}" stroke="black"/>',
           f'<line x1="{left}" y1="{top}" x2="{left}" y2="{height - bottom}" stroke="black"/>']
    step = 5000 if max_y > 20000 else 2500
    y = 0
    while y <= max_y:
        out.append(f'<line x1="{left}" y1="{py(y):.1f}" x2="{width - right}" y2="{py(y):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{py(y) + 4:.1f}" text-anchor="end">{y:,}</text>')
        y += step
    for r in rows:
        out.append(f'<text x="{px(r["nodes"]):.1f}" y="{height - bottom + 16}" text-anchor="middle">{r["nodes"]:,}</text>')
    out.append(f'<text x="{width / 2}" y="{height - 12}" text-anchor="middle">nodes (8 GPUs each)</text>')
    for i, (name, key, color) in enumerate(series):
        points = " ".join(f'{px(r["nodes"]):.1f},{py(r[key]):.1f}' for r in rows)
        out.append(f'<polyline points="{points}" fill="none" stroke="{color}" stroke-width="2"/>')
        for r in rows:
            out.append(f'<circle cx="{px(r["nodes"]):.1f}" cy="{py(r[key]):.1f}" r="3" fill="{color}"/>')
        out.append(f'<text x="{width - right - 180}" y="{top + 16 + 16 * i}" fill="{color}">{name}</text>')
    out.append("</svg>")
    print("\n".join(out))


if __name__ == "__main__":
    main(sys.argv[1:])

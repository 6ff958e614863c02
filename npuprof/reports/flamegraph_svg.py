"""A self-contained, interactive SVG flame graph from folded stacks (no perl, no external tool).

One ``<g class="frame">`` holding one ``<rect>`` per frame of the merged call tree (root ``all`` at the
bottom). Hovering a frame shows its name, time and share of the total (as a tooltip and in the details line);
clicking zooms to it, clicking ``all`` or "Reset zoom" zooms back. Frames narrower than ``min_width_px`` are
left out, as flamegraph.pl does, and the graph says how many.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from xml.sax.saxutils import escape

WIDTH = 1200
FRAME_HEIGHT = 16
FONT_SIZE = 11
CHAR_WIDTH = 6.7  # monospace at FONT_SIZE
PAD_X = 10
TOP = 48
BOTTOM = 34
_PYTHON_FRAME = re.compile(r"\(\d+\):|^<built-in|^nn\.Module:")
_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


@dataclass
class Frame:
    name: str
    depth: int
    value: float = 0.0
    offset: float = 0.0
    children: dict[str, Frame] = field(default_factory=dict)


def build_tree(stacks: dict[tuple[str, ...], float]) -> Frame:
    root = Frame("all", 0)
    for path, value in stacks.items():
        if value <= 0:
            continue
        root.value += value
        node = root
        for depth, name in enumerate(path, 1):
            child = node.children.get(name)
            if child is None:
                child = node.children[name] = Frame(name, depth)
            child.value += value
            node = child
    _place(root, 0.0)
    return root


def _place(root: Frame, offset: float) -> None:
    """Each frame's x offset: its parent's, plus its earlier siblings' widths. A loop, not a recursion:
    Python stacks of a thousand frames and more (a recursive model) are real."""
    root.offset = offset
    pending = [root]
    while pending:
        node = pending.pop()
        offset = node.offset
        for name in sorted(node.children):  # alphabetical, as flamegraph.pl: merged stacks sit together
            child = node.children[name]
            child.offset = offset
            offset += child.value
            pending.append(child)


def visible_frames(root: Frame, min_width_px: float = 0.1, width: int = WIDTH) -> list[Frame]:
    """Frames drawn: those at least ``min_width_px`` wide (and only under drawn parents)."""
    if root.value <= 0:
        return []
    scale = (width - 2 * PAD_X) / root.value
    out: list[Frame] = []
    stack = [root]
    while stack:
        node = stack.pop()
        if node is not root and node.value * scale < min_width_px:
            continue
        out.append(node)
        stack.extend(node.children.values())
    return out


def _colour(name: str) -> str:
    digest = hashlib.md5(name.encode("utf-8", "replace"), usedforsecurity=False).digest()
    a, b, c = digest[0] / 255, digest[1] / 255, digest[2] / 255
    if _PYTHON_FRAME.search(name):
        # Python frames: greens
        return f"rgb({int(50 + 80 * a)},{int(160 + 60 * b)},{int(50 + 60 * c)})"
    if name.startswith(("ProfilerStep", "Optimizer.", "all")):
        return f"rgb({int(150 + 40 * a)},{int(120 + 40 * b)},{int(200 + 40 * c)})"
    # operators, kernels: warm
    return f"rgb({int(205 + 50 * a)},{int(80 + 130 * b)},{int(20 + 40 * c)})"


def _clean(text: str) -> str:
    return _XML_INVALID.sub("?", text)


def _label(name: str, width_px: float) -> str:
    chars = int((width_px - 6) / CHAR_WIDTH)
    if chars < 3:
        return ""
    return name if len(name) <= chars else name[: chars - 2] + ".."


def _format_us(value: float) -> str:
    return f"{value:,.0f} µs" if value >= 1 else f"{value:.3f} µs"


def render_svg(
    stacks: dict[tuple[str, ...], float],
    *,
    title: str = "Flame graph",
    unit_label: str = "self time",
    min_width_px: float = 0.1,
    width: int = WIDTH,
) -> str:
    """The SVG text for ``stacks`` (path -> µs)."""
    root = build_tree(stacks)
    frames = visible_frames(root, min_width_px, width)
    total_nodes = _count(root)
    max_depth = max((f.depth for f in frames), default=0)
    height = TOP + (max_depth + 1) * FRAME_HEIGHT + BOTTOM
    inner = width - 2 * PAD_X
    scale = inner / root.value if root.value > 0 else 0.0
    omitted = total_nodes - len(frames)
    subtitle = f"{unit_label}, total {_format_us(root.value)}; {len(frames)} frames"
    if omitted:
        subtitle += f" ({omitted} narrower than {min_width_px:g} px left out)"
    subtitle += ". Hover: details. Click: zoom."

    parts = [
        '<?xml version="1.0" encoding="UTF-8" standalone="no"?>',
        f'<svg version="1.1" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" data-total="{root.value:.3f}" data-frame-height="{FRAME_HEIGHT}" '
        f'onload="npuprofInit(evt)">',
        "<style>",
        f"text {{ font-family: monospace; font-size: {FONT_SIZE}px; fill: #000; }}",
        ".frame:hover rect { stroke: #000; stroke-width: 0.5; cursor: pointer; }",
        ".frame text { pointer-events: none; }",
        ".parent rect { opacity: 0.5; }",
        ".hidden { display: none; }",
        "#reset { cursor: pointer; fill: #06c; }",
        "</style>",
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#f8f8f0"/>',
        f'<text x="{width / 2:.1f}" y="18" text-anchor="middle" style="font-size:15px">'
        f"{escape(_clean(title))}</text>",
        f'<text x="{width / 2:.1f}" y="36" text-anchor="middle">{escape(_clean(subtitle))}</text>',
        f'<text id="reset" x="{PAD_X}" y="18" class="hidden" onclick="npuprofReset()">Reset zoom</text>',
        f'<text id="details" x="{PAD_X}" y="{height - 12}"> </text>',
        '<g id="frames">',
    ]
    for frame in sorted(frames, key=lambda f: (f.depth, f.offset)):
        x = PAD_X + frame.offset * scale
        w = frame.value * scale
        y = height - BOTTOM - (frame.depth + 1) * FRAME_HEIGHT
        name = _clean(frame.name)
        share = 100.0 * frame.value / root.value
        info = f"{name} ({_format_us(frame.value)}, {share:.2f}%)"
        parts.append(
            f'<g class="frame" data-name="{escape(name, {chr(34): "&quot;"})}" data-x="{frame.offset:.3f}" '
            f'data-v="{frame.value:.3f}" data-d="{frame.depth}" onclick="npuprofZoom(this)" '
            f'onmouseover="npuprofShow(this)" onmouseout="npuprofShow(null)">'
            f"<title>{escape(info)}</title>"
            f'<rect x="{x:.2f}" y="{y}" width="{w:.2f}" height="{FRAME_HEIGHT - 1}" rx="2" '
            f'fill="{_colour(frame.name)}"/>'
            f'<text x="{x + 3:.2f}" y="{y + FRAME_HEIGHT - 4}">{escape(_label(name, w))}</text></g>'
        )
    script = _SCRIPT.replace("__PAD__", str(PAD_X))
    parts += ["</g>", "<script><![CDATA[", script, "]]></script>", "</svg>", ""]
    return "\n".join(parts)


def _count(root: Frame) -> int:
    count = 0
    stack = [root]
    while stack:
        node = stack.pop()
        count += 1
        stack.extend(node.children.values())
    return count


_SCRIPT = r"""
var svg, frames, details, reset, total, inner, pad = __PAD__, charW = 6.7;
function npuprofInit(evt) {
  svg = document.documentElement;
  frames = Array.prototype.slice.call(document.querySelectorAll('g.frame'));
  details = document.getElementById('details');
  reset = document.getElementById('reset');
  total = parseFloat(svg.getAttribute('data-total'));
  inner = parseFloat(svg.getAttribute('width')) - 2 * pad;
}
function fmt(v) {
  return v >= 1 ? Math.round(v).toLocaleString('en-US') + ' \u00b5s' : v.toFixed(3) + ' \u00b5s';
}
function npuprofShow(g) {
  if (!details) return;
  if (!g) { details.textContent = ' '; return; }
  var v = parseFloat(g.getAttribute('data-v'));
  var share = (100 * v / total).toFixed(2);
  details.textContent = g.getAttribute('data-name') + ': ' + fmt(v) + ', ' + share + '%';
}
function place(g, x, w) {
  var r = g.querySelector('rect'), t = g.querySelector('text');
  r.setAttribute('x', x.toFixed(2)); r.setAttribute('width', w.toFixed(2));
  t.setAttribute('x', (x + 3).toFixed(2));
  var name = g.getAttribute('data-name'), n = Math.floor((w - 6) / charW);
  t.textContent = n < 3 ? '' : (name.length <= n ? name : name.substring(0, n - 2) + '..');
}
function npuprofZoom(g) {
  var x0 = parseFloat(g.getAttribute('data-x')), v0 = parseFloat(g.getAttribute('data-v'));
  var d0 = parseInt(g.getAttribute('data-d'), 10), eps = 1e-6 * total;
  if (d0 === 0) { npuprofReset(); return; }
  frames.forEach(function (f) {
    var x = parseFloat(f.getAttribute('data-x')), v = parseFloat(f.getAttribute('data-v'));
    var d = parseInt(f.getAttribute('data-d'), 10);
    f.classList.remove('hidden'); f.classList.remove('parent');
    if (d < d0 && x <= x0 + eps && x + v >= x0 + v0 - eps) {
      f.classList.add('parent'); place(f, pad, inner);
    } else if (d >= d0 && x >= x0 - eps && x + v <= x0 + v0 + eps) {
      place(f, pad + (x - x0) / v0 * inner, v / v0 * inner);
    } else {
      f.classList.add('hidden');
    }
  });
  reset.classList.remove('hidden');
}
function npuprofReset() {
  frames.forEach(function (f) {
    f.classList.remove('hidden'); f.classList.remove('parent');
    var x = parseFloat(f.getAttribute('data-x')), v = parseFloat(f.getAttribute('data-v'));
    place(f, pad + x / total * inner, v / total * inner);
  });
  reset.classList.add('hidden');
}
"""

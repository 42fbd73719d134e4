"""Render scenes as small RGB images (PIL) and show examples with their captions (matplotlib).

The default 48×48 px image splits into 3×3 cells of 16 px, one per grid cell, so a vision tower
with 16-px patches sees one object per patch.

Objects sit in the cells of a 3×3 grid; shapes are drawn at 4× resolution and downsampled with a
box filter, so edges are anti-aliased and the output is byte-identical for the same scene.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PIL import Image, ImageDraw

if TYPE_CHECKING:  # pragma: no cover
    from tokenbook.worlds.scenes import Scene

__all__ = ["COLOURS", "SHAPES", "SIZES", "GRID", "render_scene", "example_figure"]

#: colour concept -> RGB
COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 40, 40), "green": (40, 180, 60), "blue": (50, 80, 230),
    "yellow": (235, 215, 40), "purple": (150, 60, 190), "white": (245, 245, 245),
}
SHAPES = ("circle", "square", "triangle", "diamond", "cross")
#: object sizes (drawn with radius 0.44 or 0.26 of a grid cell)
SIZES = ("big", "small")
GRID = 3
BACKGROUND = (60, 60, 60)
_SUPER = 4


def render_scene(scene: "Scene", size: int = 48) -> Image.Image:
    """Draw ``scene`` as a ``size``×``size`` RGB image."""
    if size < 12:
        raise ValueError(f"image size must be at least 12 pixels, got {size}")
    S = size * _SUPER
    img = Image.new("RGB", (S, S), BACKGROUND)
    draw = ImageDraw.Draw(img)
    cell = S / GRID
    for obj in scene.objects:
        cx = (obj.col + 0.5) * cell + obj.dx * cell
        cy = (obj.row + 0.5) * cell + obj.dy * cell
        r = cell * (0.44 if obj.size == "big" else 0.26)
        fill = COLOURS[obj.colour]
        if obj.shape == "circle":
            draw.ellipse([cx - r, cy - r, cx + r, cy + r], fill=fill)
        elif obj.shape == "square":
            q = r * 0.85
            draw.rectangle([cx - q, cy - q, cx + q, cy + q], fill=fill)
        elif obj.shape == "triangle":
            draw.polygon([(cx, cy - r), (cx - r, cy + r * 0.8), (cx + r, cy + r * 0.8)], fill=fill)
        elif obj.shape == "diamond":
            draw.polygon([(cx, cy - r), (cx + r, cy), (cx, cy + r), (cx - r, cy)], fill=fill)
        elif obj.shape == "cross":
            w = r * 0.38
            draw.rectangle([cx - r, cy - w, cx + r, cy + w], fill=fill)
            draw.rectangle([cx - w, cy - r, cx + w, cy + r], fill=fill)
        else:
            raise ValueError(f"unknown shape {obj.shape!r}; known: {SHAPES}")
    return img.resize((size, size), Image.Resampling.BOX)


def example_figure(world, n: int = 4, *, split: str = "test", langs=None, story: bool = False):
    """A matplotlib figure of ``n`` example images with their captions in ``langs``.

    With ``story=True`` the panels are the consecutive scenes of one story with its sentences.
    Returns the Figure (the caller shows or saves it).
    """
    import matplotlib.pyplot as plt

    langs = list(langs) if langs is not None else list(world.languages[:3])
    if story:
        st = world.stories[world.stories.split == split]
        sid = sorted(st.story_id.unique())[0]
        st = st[st.story_id == sid]
        scene_ids = list(dict.fromkeys(st.sort_values("sent_idx").scene_id))[:n]
        table, key = st, "scene_id"
    else:
        caps = world.captions[world.captions.split == split]
        scene_ids = sorted(caps.scene_id.unique())[:n]
        table, key = caps, "scene_id"
    fig, axes = plt.subplots(1, len(scene_ids), figsize=(3.2 * len(scene_ids), 3.6))
    axes = [axes] if len(scene_ids) == 1 else list(axes)
    for ax, sc in zip(axes, scene_ids):
        ax.imshow(world.image(sc), interpolation="nearest")
        ax.set_xticks([])
        ax.set_yticks([])
        ax.grid(False)
        lines = []
        for lang in langs:
            rows = table[(table[key] == sc) & (table.lang == lang)]
            if len(rows):
                text = rows.iloc[0].text
                lines.append(f"{lang}: {text if len(text) < 38 else text[:36] + '…'}")
        ax.set_title(sc, fontsize=9)
        ax.set_xlabel("\n".join(lines), fontsize=7)
    px = world.params["image_size"]
    fig.suptitle(f"Scenes ({px}×{px} px) with " + ("story sentences" if story else "captions"),
                 fontsize=10)
    fig.tight_layout()
    return fig

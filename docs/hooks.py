"""MkDocs hooks of the documentation site (``hooks:`` in mkdocs.yml; not a page of the site).

- The configuration page's key table is generated: the marker ``<!-- config-keys -->`` in a
  page is replaced by :func:`mnemonia.config.reference_markdown` (every key: name, type,
  default, allowed values, doc), so the page cannot drift from the code. Without that
  function the build fails, saying so.
- The notebooks of ``notebooks/`` become pages ``notebooks/<name>.ipynb`` (rendered by
  mkdocs-jupyter) without a copy in ``docs/``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
CONFIG_MARKER = "<!-- config-keys -->"
NOTEBOOKS = ROOT / "notebooks"


def _this_checkout_first() -> None:
    """Document this checkout's code: its ``shared/`` before any installed ``mnemonia``."""
    shared = str(ROOT / "shared")
    if shared not in sys.path:
        sys.path.insert(0, shared)


def config_reference() -> str:
    """The Markdown table of every config key, from the code."""
    _this_checkout_first()
    try:
        from mnemonia import config
    except ImportError as e:
        raise PluginError(f"docs/hooks.py: cannot import mnemonia.config ({e}); install the "
                          "workspace first (bash scripts/setup.sh)") from e
    reference = getattr(config, "reference_markdown", None)
    if reference is None:
        raise PluginError(
            "docs/hooks.py: mnemonia.config.reference_markdown() does not exist in "
            f"{config.__file__}. The configuration page's key table ({CONFIG_MARKER} in "
            "docs/configuration.md) is generated from it; the site cannot be built without it.")
    table = reference()
    if not isinstance(table, str) or "|" not in table:
        raise PluginError("docs/hooks.py: mnemonia.config.reference_markdown() returned "
                          f"{type(table).__name__}, not a Markdown table")
    return table


def on_page_markdown(markdown: str, *, page: Any, config: Any, files: Files) -> str:
    if CONFIG_MARKER not in markdown:
        return markdown
    return markdown.replace(CONFIG_MARKER, config_reference())


@event_priority(100)  # before mkdocs-jupyter turns .ipynb files into pages
def on_files(files: Files, *, config: Any) -> Files:
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        uri = f"notebooks/{path.name}"
        if files.get_file_from_path(uri) is None:
            # a File read from the repository root (not File.generated: mkdocs-jupyter's
            # wrapper finds the source through src_dir)
            files.append(File(uri, src_dir=str(ROOT), dest_dir=config.site_dir,
                              use_directory_urls=config.use_directory_urls))
    return files

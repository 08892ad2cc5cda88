"""mkdocs-gen-files script (mkdocs.yml): writes the generated reference pages into the site."""
import sys
from pathlib import Path

import mkdocs_gen_files

sys.path.insert(0, str(Path(__file__).resolve().parent))
from docs_reference import api_page, settings_page  # noqa: E402  (this folder is not a package)

for path, text in (("reference/settings.md", settings_page()), ("reference/api.md", api_page())):
    with mkdocs_gen_files.open(path, "w") as page:
        page.write(text)

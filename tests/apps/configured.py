"""An app whose settings are read from a config file's text (every value a string), as many
deployments do: CONFIGURED_COMMIT_INTERVAL stands for the file's entry."""
import os

import streamkit as sk

app = sk.App("configured", commit_interval=os.environ.get("CONFIGURED_COMMIT_INTERVAL", "1"))

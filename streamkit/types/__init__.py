"""Interfaces the layers below the app depend on instead of the classes above them (as Faust's
``faust/types``): a topic, table, agent or the runtime is handed an object that satisfies
``AppProtocol``, never imports ``streamkit.app``."""

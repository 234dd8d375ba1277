#!/usr/bin/env python3
"""A GTK 3 text field for the end-to-end test: each change of its text is written to the file
named by the first argument (whole, then renamed, so a reader never sees half a write)."""
import os
import sys

import gi

gi.require_version("Gtk", "3.0")
from gi.repository import Gtk  # noqa: E402

out = sys.argv[1]


def changed(entry):
    with open(out + ".tmp", "w", encoding="utf-8") as f:
        f.write(entry.get_text())
    os.replace(out + ".tmp", out)


window = Gtk.Window(title="fastsoftmax-ibus e2e")
window.set_default_size(520, 60)
window.move(40, 40)
entry = Gtk.Entry()
entry.connect("changed", changed)
window.add(entry)
window.connect("destroy", Gtk.main_quit)
window.show_all()
entry.grab_focus()
Gtk.main()

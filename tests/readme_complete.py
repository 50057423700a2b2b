#!/usr/bin/env python3
"""Checks that README.md documents every NALLOC_CONF key and every
nalloc_ctl name, as read from the conf and ctl rows in the sources (each
module of alloc/ and prof/ holds its own rows: {"key", CONF_... and
{"name", CTL_...). A key or name added to the code without a README entry
fails this test."""
import re
import sys
from pathlib import Path

top = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent)
readme = (top / "README.md").read_text()
sources = sorted((top / "alloc").glob("*.c")) + sorted((top / "prof").glob("*.c"))
text = "".join(p.read_text() for p in sources)

keys = re.findall(r'\{"([a-z_]+)",\s*CONF_', text)
names = re.findall(r'\{"([a-z_#.]+)",\s*CTL_[A-Z0-9]+,', text)
missing = []
for k in keys:
    if f"`{k}`" not in readme:
        missing.append(f"NALLOC_CONF key {k}")
for n in names:
    full = n.replace("#", "<i>")
    if f"`{full}`" in readme:
        continue
    prefix, last = full.rsplit(".", 1)
    if f"`{prefix}." in readme and f"`.{last}`" in readme:
        continue
    missing.append(f"ctl name {n}")
if len(keys) < 10 or len(names) < 20:
    print(f"found only {len(keys)} keys and {len(names)} names: the table patterns changed")
    sys.exit(1)
for m in missing:
    print("README.md does not document", m)
print(f"{len(keys)} keys, {len(names)} ctl names checked; {len(missing)} missing")
sys.exit(1 if missing else 0)

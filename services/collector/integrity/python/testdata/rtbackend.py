"""A minimal PEP 517/660 build backend for tests: no dependencies, so pip
builds wheels offline with or without build isolation. The project is
described by rtproject.json beside this file:
{"name": ..., "version": ..., "requires": [...], "packages": [...],
 "scripts": {"cmd": "module:function"}}"""
import base64, hashlib, json, os, zipfile

def _cfg():
    with open("rtproject.json") as f:
        return json.load(f)

def _dist(cfg):
    return cfg["name"].replace("-", "_")

def _meta(cfg):
    lines = ["Metadata-Version: 2.1", "Name: " + cfg["name"], "Version: " + cfg["version"]]
    lines += ["Requires-Dist: " + r for r in cfg.get("requires", [])]
    return "\n".join(lines) + "\n\nA test package.\n"

def _sources(cfg):
    out = []
    for pkg in cfg.get("packages", []):
        for root, dirs, files in os.walk(pkg):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                p = os.path.join(root, name)
                with open(p, "rb") as f:
                    out.append((p.replace(os.sep, "/"), f.read()))
    return out

def _wheel(wheel_directory, cfg, files):
    di = "%s-%s.dist-info" % (_dist(cfg), cfg["version"])
    wn = "%s-%s-py3-none-any.whl" % (_dist(cfg), cfg["version"])
    files = list(files) + [
        (di + "/METADATA", _meta(cfg).encode()),
        (di + "/WHEEL", b"Wheel-Version: 1.0\nGenerator: rtbackend\nRoot-Is-Purelib: true\nTag: py3-none-any\n"),
    ]
    scripts = cfg.get("scripts", {})
    if scripts:
        ep = "[console_scripts]\n" + "".join("%s = %s\n" % kv for kv in sorted(scripts.items()))
        files.append((di + "/entry_points.txt", ep.encode()))
    rec = []
    with zipfile.ZipFile(os.path.join(wheel_directory, wn), "w") as z:
        for p, data in files:
            z.writestr(p, data)
            h = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            rec.append("%s,sha256=%s,%d" % (p, h, len(data)))
        rec.append(di + "/RECORD,,")
        z.writestr(di + "/RECORD", "\n".join(rec) + "\n")
    return wn

def get_requires_for_build_wheel(config_settings=None):
    return []

def get_requires_for_build_editable(config_settings=None):
    return []

def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    cfg = _cfg()
    return _wheel(wheel_directory, cfg, _sources(cfg))

def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    cfg = _cfg()
    pth = ("__editable__.%s.pth" % _dist(cfg), (os.path.abspath(".") + "\n").encode())
    return _wheel(wheel_directory, cfg, [pth])

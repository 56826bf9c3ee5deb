"""Build a one-layer OCI image archive from a static binary, no registry needed.

The archive is an OCI image layout in a tar (what `ctr images import` reads):
oci-layout, index.json and content-addressed blobs for the layer, the image
config and the manifest.
"""
import gzip
import hashlib
import io
import json
import tarfile
import time


def _blob(tar, data):
    digest = hashlib.sha256(data).hexdigest()
    info = tarfile.TarInfo("blobs/sha256/" + digest)
    info.size = len(data)
    info.mtime = int(time.time())
    tar.addfile(info, io.BytesIO(data))
    return "sha256:" + digest


def build(binary_path, out_path, name, entrypoint_args=()):
    """name: full reference, e.g. docker.io/library/pushprof-test:1."""
    layer_raw = io.BytesIO()
    with tarfile.open(fileobj=layer_raw, mode="w") as lt:
        with open(binary_path, "rb") as f:
            data = f.read()
        info = tarfile.TarInfo("app")
        info.size = len(data)
        info.mode = 0o755
        lt.addfile(info, io.BytesIO(data))
    raw = layer_raw.getvalue()
    layer_gz = gzip.compress(raw, mtime=0)
    diff_id = "sha256:" + hashlib.sha256(raw).hexdigest()

    with tarfile.open(out_path, "w") as tar:
        layer_digest = _blob(tar, layer_gz)
        config = json.dumps({
            "architecture": "amd64", "os": "linux",
            "config": {"Entrypoint": ["/app"] , "Cmd": list(entrypoint_args),
                       "Env": ["PATH=/"]},
            "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        }).encode()
        config_digest = _blob(tar, config)
        manifest = json.dumps({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                       "digest": config_digest, "size": len(config)},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                        "digest": layer_digest, "size": len(layer_gz)}],
        }).encode()
        manifest_digest = _blob(tar, manifest)
        index = json.dumps({
            "schemaVersion": 2,
            "manifests": [{
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": manifest_digest, "size": len(manifest),
                "platform": {"architecture": "amd64", "os": "linux"},
                "annotations": {"io.containerd.image.name": name,
                                "org.opencontainers.image.ref.name": name.rsplit(":", 1)[-1]},
            }],
        }).encode()
        for fname, data in (("oci-layout", b'{"imageLayoutVersion": "1.0.0"}'),
                            ("index.json", index)):
            info = tarfile.TarInfo(fname)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return manifest_digest

"""Minimal CRI (runtime.v1) client for tests, over grpcio with messages that
protoc generates from proto/cri/runtime.proto at test time."""
import importlib
import os
import subprocess
import sys

import grpc


def load_pb(src_dir, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    subprocess.run(["protoc", "--proto_path=" + os.path.join(src_dir, "proto", "cri"),
                    "--python_out=" + out_dir,
                    os.path.join(src_dir, "proto", "cri", "runtime.proto")], check=True)
    sys.path.insert(0, out_dir)
    return importlib.import_module("runtime_pb2")


class CRI:
    def __init__(self, pb, socket_path, timeout=30):
        self.pb = pb
        self.timeout = timeout
        self.ch = grpc.insecure_channel("unix://" + socket_path)

    def call(self, method, req, resp_name=None, service="RuntimeService"):
        resp_cls = getattr(self.pb, resp_name or (method + "Response"))
        fn = self.ch.unary_unary(f"/runtime.v1.{service}/" + method,
                                 request_serializer=lambda m: m.SerializeToString(),
                                 response_deserializer=resp_cls.FromString)
        return fn(req, timeout=self.timeout)

    def version(self):
        return self.call("Version", self.pb.VersionRequest(version="v1"))

    def run_pod(self, name, namespace, uid, labels, annotations, cgroup_parent):
        pb = self.pb
        cfg = pb.PodSandboxConfig(
            metadata=pb.PodSandboxMetadata(name=name, namespace=namespace, uid=uid),
            labels=labels, annotations=annotations,
            linux_config=pb.LinuxPodSandboxConfig(
                cgroup_parent=cgroup_parent,
                security_context=pb.LinuxSandboxSecurityContext(
                    namespace_options=pb.NamespaceOption(network=pb.NODE))))
        r = self.call("RunPodSandbox", pb.RunPodSandboxRequest(config=cfg))
        return r.pod_sandbox_id, cfg

    def image_id(self, tag):
        """The runtime's id ("sha256:...") of the image tagged tag."""
        r = self.call("ListImages", self.pb.ListImagesRequest(), service="ImageService")
        return [im.id for im in r.images if tag in im.repo_tags][0]

    def create_start(self, sandbox_id, sandbox_cfg, name, image, args, labels,
                     user_image=""):
        """image: a name, or an image id as kubelet passes it (user_image:
        the pod spec's name, which kubelet 1.28+ sends beside the id)."""
        pb = self.pb
        cc = pb.ContainerConfig(
            metadata=pb.ContainerMetadata(name=name),
            image=pb.ImageSpec(image=image, user_specified_image=user_image),
            args=args, labels=labels,
            linux_config=pb.LinuxContainerConfig(security_context=pb.LinuxContainerSecurityContext(
                namespace_options=pb.NamespaceOption(network=pb.NODE))))
        r = self.call("CreateContainer", pb.CreateContainerRequest(
            pod_sandbox_id=sandbox_id, config=cc, sandbox_config=sandbox_cfg))
        self.call("StartContainer", pb.StartContainerRequest(container_id=r.container_id))
        return r.container_id

    def container_pid(self, cid):
        import json
        r = self.call("ContainerStatus", self.pb.ContainerStatusRequest(container_id=cid,
                                                                        verbose=True))
        return int(json.loads(r.info["info"])["pid"])

    def remove_pod(self, sandbox_id):
        pb = self.pb
        self.call("StopPodSandbox", pb.StopPodSandboxRequest(pod_sandbox_id=sandbox_id))
        self.call("RemovePodSandbox", pb.RemovePodSandboxRequest(pod_sandbox_id=sandbox_id))

"""clouds.yaml for the OpenStack simulator (ossim.py), and a simulator
configuration derived from a nodepool.yaml.

As a library (tests):
    import clouds_yaml
    doc = clouds_yaml.clouds_yaml(info)          # info: the --ready-file JSON
    cfg, where = clouds_yaml.sim_config_from_nodepool(nodepool_cfg)

As a command:
    python3 tests/sim/openstack/clouds_yaml.py --ready-file R [-o clouds.yaml]
        [--per-region] [--auth password|application-credential]
        [--interface public|internal] [--api-timeout S] [--secure secure.yaml]
    python3 tests/sim/openstack/clouds_yaml.py --from-nodepool nodepool.yaml
        --sim-config sim.json      (then start ossim with --config sim.json)

clouds.yaml shapes:
  default       one entry per simulated cloud, named as the cloud, with
                `regions:` listing its regions; a nodepool provider names it
                with `cloud:` and picks one with `region-name:`
  --per-region  also one entry per region, named "<cloud>-<region>", with
                `region_name:` set
Password auth writes username/password/project_name/*_domain_name;
application-credential auth writes auth_type v3applicationcredential with
application_credential_id/secret. With HTTPS the CA is written as `cacert`.
"""
import argparse
import json
import os
import sys
import uuid


def clouds_yaml(info, per_region=False, auth="password", interface=None, api_timeout=None,
                cacert=None, verify=None):
    """A clouds.yaml document (dict) for a running simulator. info is the
    ready-file JSON (ossim.serve's info)."""
    clouds = {}
    for name, c in info["clouds"].items():
        if auth == "password":
            a = {"auth_url": c["auth_url"], "username": c["username"],
                 "password": c["password"], "project_name": c["project_name"],
                 "user_domain_name": c["user_domain_name"],
                 "project_domain_name": c["project_domain_name"]}
            entry = {"auth": a}
        elif auth == "application-credential":
            ac = c["application_credentials"][0]
            entry = {"auth_type": "v3applicationcredential",
                     "auth": {"auth_url": c["auth_url"],
                              "application_credential_id": ac["id"],
                              "application_credential_secret": ac["secret"]}}
        else:
            raise ValueError("auth: password or application-credential")
        entry["identity_api_version"] = 3
        if interface:
            entry["interface"] = interface
        if api_timeout is not None:
            entry["api_timeout"] = api_timeout
        ca = cacert or info.get("cacert")
        if ca:
            entry["cacert"] = ca
        if verify is not None:
            entry["verify"] = verify
        clouds[name] = dict(entry, regions=list(c["regions"]))
        if per_region:
            for r in c["regions"]:
                clouds["%s-%s" % (name, r)] = dict(entry, region_name=r)
    return {"clouds": clouds}


SECRET_KEYS = ("password", "application_credential_secret")


def split_secure(doc):
    """(clouds, secure): the clouds.yaml document without its secrets, and
    a secure.yaml document holding them (openstacksdk merges the two; its
    places: OS_CLIENT_SECURE_FILE, or secure.yaml beside clouds.yaml)."""
    clouds = {"clouds": {}}
    secure = {"clouds": {}}
    for name, entry in doc["clouds"].items():
        e = dict(entry)
        auth = dict(e.get("auth") or {})
        secrets = {k: auth.pop(k) for k in SECRET_KEYS if k in auth}
        e["auth"] = auth
        clouds["clouds"][name] = e
        if secrets:
            secure["clouds"][name] = {"auth": secrets}
    return clouds, secure


def dump_yaml(doc):
    """YAML text for a clouds.yaml (python3-yaml when present, else JSON,
    which is YAML too)."""
    try:
        import yaml
        return yaml.safe_dump(doc, default_flow_style=False, sort_keys=False)
    except ImportError:
        return json.dumps(doc, indent=2) + "\n"


def diskimage_image_id(cloud, region, diskimage):
    """The id sim_config_from_nodepool gives the image it seeds for a
    provider diskimage: stable, so a test can record it as the upload's
    external id without running a builder."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "ossim:%s/%s/%s" % (cloud, region, diskimage)))


def sim_config_from_nodepool(npcfg, boot_delay=0.5, ram=8192):
    """A simulator configuration serving every openstack provider of a
    nodepool.yaml (dict): one simulated cloud per `cloud:` value (the
    provider name when unset), one region per provider (`region-name`, or
    RegionOne), with the flavors, cloud images, networks, security groups,
    availability zones and key names the provider's pools ask for, and one
    active image per provider diskimage (named as the diskimage, id from
    diskimage_image_id). A pool that names networks gets them as tenant
    networks plus an external network `public` for floating IPs (the shape
    of such clouds); otherwise the region has the default provider network.
    Returns (config, {provider name: (cloud, region)})."""
    clouds = {}
    where = {}
    for p in npcfg.get("providers") or []:
        if p.get("driver", "openstack") != "openstack":
            continue
        cloud = p.get("cloud") or p["name"]
        region = p.get("region-name") or "RegionOne"
        c = clouds.setdefault(cloud, {"regions": {}})
        r = c["regions"].setdefault(region, {
            "boot_delay": boot_delay, "flavors": [], "images": [], "networks": [],
            "security_groups": [], "availability_zones": [], "keypairs": []})
        where[p["name"]] = (cloud, region)
        fl = {f["name"] for f in r["flavors"]}
        nets = {n["name"] for n in r["networks"]}
        for di in p.get("diskimages") or []:
            if not any(i.get("name") == di["name"] for i in r["images"]):
                r["images"].append({"name": di["name"],
                                    "id": diskimage_image_id(cloud, region, di["name"])})
        for ci in p.get("cloud-images") or []:
            spec = {"name": ci.get("image-name") or ci["name"]}
            if ci.get("image-id"):
                spec["id"] = ci["image-id"]
            r["images"].append(spec)
        for pool in p.get("pools") or []:
            for n in pool.get("networks") or []:
                if n not in nets:
                    nets.add(n)
                    r["networks"].append({"name": n, "cidr": "10.%d.0.0/16" % (20 + len(nets))})
            for g in pool.get("security-groups") or []:
                if g not in r["security_groups"] and g != "default":
                    r["security_groups"].append(g)
            for z in pool.get("availability-zones") or []:
                if z not in r["availability_zones"]:
                    r["availability_zones"].append(z)
            for lab in pool.get("labels") or []:
                name = lab.get("flavor-name")
                mr = lab.get("min-ram")
                fname = name or "sim-%d" % (mr or ram)
                if fname not in fl:
                    fl.add(fname)
                    r["flavors"].append({"name": fname, "ram": max(int(mr or 0), ram),
                                         "vcpus": 8, "disk": 80})
                if lab.get("key-name") and lab["key-name"] not in r["keypairs"]:
                    r["keypairs"].append(lab["key-name"])
    for c in clouds.values():
        for r in c["regions"].values():
            if not r["availability_zones"]:
                r["availability_zones"] = ["nova"]
            if not r["networks"]:
                del r["networks"]  # the default provider network shape
            elif not any(n["name"] == "public" for n in r["networks"]):
                r["networks"].append({"name": "public", "cidr": "100.64.0.0/16",
                                      "external": True})
            if not r["images"]:
                r["images"] = [{"name": "cirros"}]
            if not r["flavors"]:
                del r["flavors"]
    return {"clouds": clouds}, where


def main(argv=None):
    ap = argparse.ArgumentParser(description="clouds.yaml for the OpenStack simulator")
    ap.add_argument("--ready-file", help="the simulator's --ready-file JSON")
    ap.add_argument("-o", "--output", help="write here (default stdout)")
    ap.add_argument("--per-region", action="store_true")
    ap.add_argument("--auth", default="password",
                    choices=("password", "application-credential"))
    ap.add_argument("--interface", choices=("public", "internal"))
    ap.add_argument("--api-timeout", type=float)
    ap.add_argument("--secure", help="write the secrets to this secure.yaml instead")
    ap.add_argument("--from-nodepool", help="nodepool.yaml to derive a simulator config from")
    ap.add_argument("--sim-config", help="where to write that simulator config (JSON)")
    a = ap.parse_args(argv)
    if a.from_nodepool:
        import yaml
        with open(a.from_nodepool) as f:
            cfg, where = sim_config_from_nodepool(yaml.safe_load(f))
        text = json.dumps(cfg, indent=1) + "\n"
        if a.sim_config:
            with open(a.sim_config, "w") as f:
                f.write(text)
        else:
            sys.stdout.write(text)
        if not a.ready_file:
            return 0
    if not a.ready_file:
        ap.error("--ready-file is needed for clouds.yaml")
    with open(a.ready_file) as f:
        info = json.load(f)
    doc = clouds_yaml(info, per_region=a.per_region, auth=a.auth,
                      interface=a.interface, api_timeout=a.api_timeout)
    if a.secure:
        doc, sec = split_secure(doc)
        with open(a.secure, "w") as f:
            f.write(dump_yaml(sec))
    text = dump_yaml(doc)
    if a.output:
        tmp = a.output + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.rename(tmp, a.output)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

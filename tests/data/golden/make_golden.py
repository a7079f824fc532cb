#!/usr/bin/python3
"""Write the golden znode bodies in this folder.

Each record is built by hand as upstream Nodepool (gndrmnn/nodepool at
a0d1eb5) would serialize it: Node/NodeRequest/ImageBuild/ImageUpload are
json.dumps(d) of a dict filled in the key order of that class's toDict();
components are json.dumps(content, sort_keys=True).  Files named after a
quirk hold bodies that upstream's readers accept but its current writers
no longer produce (older releases, other writers such as Zuul, or hand
edits).  The bodies have no trailing newline, as in ZooKeeper.

Run from anywhere: /usr/bin/python3 tests/data/golden/make_golden.py
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))

LAUNCHER = ("nl01.example.com-PoolWorker.rax-dfw-main-"
            "5c1e0b4a9f8d4e2a8b7c6d5e4f3a2b1c")
UPLOAD_PATH = ("/nodepool/images/ubuntu-jammy/builds/"
               "3f2b9c7d1e8a4b6c9d0e1f2a3b4c5d6e/providers/rax-dfw/images/"
               "0000000001")


def node(**kw):
    """A node in Node.toDict() key order, every key present."""
    d = {}
    d['state'] = 'ready'
    d['state_time'] = 1726560123.456789
    d['cloud'] = 'rax'
    d['provider'] = 'rax-dfw'
    d['pool'] = 'main'
    d['type'] = ['ubuntu-jammy']
    d['allocated_to'] = None
    d['az'] = 'nova'
    d['region'] = 'DFW'
    d['public_ipv4'] = '203.0.113.10'
    d['private_ipv4'] = '10.0.0.10'
    d['public_ipv6'] = '2001:db8::10'
    d['host_id'] = 'c0ffee'
    d['interface_ip'] = '203.0.113.10'
    d['connection_port'] = 22
    d['ssh_port'] = 22
    d['image_id'] = UPLOAD_PATH
    d['launcher'] = LAUNCHER
    d['created_time'] = 1726560001.25
    d['external_id'] = '6a1c3e8e-2d5b-4c77-9a3e-1b2c3d4e5f60'
    d['hostname'] = None
    d['comment'] = None
    d['user_data'] = None
    d['hold_job'] = None
    d['host_keys'] = ['ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeKeyForTests',
                      'ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQFakeRsa']
    d['username'] = 'zuul'
    d['connection_type'] = 'ssh'
    d['shell_type'] = None
    d['hold_expiration'] = None
    d['resources'] = {'cores': 4, 'instances': 1, 'ram': 8192}
    d['slot'] = None
    d['attributes'] = {'executor-zone': 'dfw'}
    d['python_path'] = 'auto'
    d['tenant_name'] = 'example'
    d['driver_data'] = None
    d['requestor'] = 'zuul-scheduler-01'
    for k, v in kw.items():
        d[k] = v
    return d


def drop(d, *keys):
    for k in keys:
        del d[k]
    return d


def request(**kw):
    """A request in NodeRequest.toDict() key order."""
    d = {}
    d['state'] = 'requested'
    d['state_time'] = 1726560200.5
    d['declined_by'] = []
    d['node_types'] = ['ubuntu-jammy', 'ubuntu-jammy']
    d['nodes'] = []
    d['reuse'] = True
    d['requestor'] = 'zuul-scheduler-01'
    d['requestor_data'] = {'build_set_uuid': '7d3f2a1b0c9e4d8f',
                           'tenant_name': 'example',
                           'pipeline': 'check',
                           'job_name': 'tox-py311'}
    d['provider'] = None
    d['relative_priority'] = 0
    d['event_id'] = 'c2b8a7e6d5f44e3a9b1c0d2e3f4a5b6c'
    d['created_time'] = 1726560199.75
    d['tenant_name'] = 'example'
    for k, v in kw.items():
        d[k] = v
    return d


def build(formats=None, builder='nb01.example.com',
          builder_id='9b6c1f0e-6a3d-4f55-8a0e-2c1d3e4f5a6b', **kw):
    """An image build in ImageBuild.toDict() key order (optional keys
    omitted when unset)."""
    d = {}
    d['state'] = kw.pop('state', 'ready')
    d['state_time'] = kw.pop('state_time', 1726550000.125)
    if builder is not None:
        d['builder'] = builder
    if builder_id is not None:
        d['builder_id'] = builder_id
    if formats:
        d['formats'] = ','.join(sorted(formats))
    d['username'] = 'zuul'
    d['python_path'] = 'auto'
    d['shell_type'] = None
    for k, v in kw.items():
        d[k] = v
    return d


def upload(**kw):
    """An image upload in ImageUpload.toDict() key order."""
    d = {}
    d['state'] = 'ready'
    d['state_time'] = 1726551000.5
    d['external_id'] = 'f1e2d3c4-b5a6-4978-8a9b-0c1d2e3f4a5b'
    d['external_name'] = 'ubuntu-jammy-1726550000'
    d['format'] = 'qcow2'
    d['username'] = 'zuul'
    d['python_path'] = 'auto'
    d['shell_type'] = None
    for k, v in kw.items():
        d[k] = v
    return d


def component(kind, **kw):
    d = {'hostname': 'nl01.example.com', 'state': 'running', 'kind': kind,
         'version': '10.0.1.dev12', 'model_api': 0}
    if kind == 'pool':
        d.update({'id': LAUNCHER, 'name': 'main', 'provider_name': 'rax-dfw',
                  'supported_labels': ['ubuntu-jammy', 'debian-bookworm'],
                  'priority': 100, 'paused': False})
    d.update(kw)
    return d


def zuul_node(read, state, state_time, **set_attrs):
    """A node as Zuul writes it back (pythonerdog/zuul zuul/model.py
    Node.toDict after Node.updateFromDict of the body it read): id, state,
    hold_job, comment, user_data, tenant_name, requestor first, then every
    other key read, in the order read; the Node.state setter refreshes
    state_time."""
    attrs = {'hold_job': None, 'comment': None, 'user_data': None,
             'tenant_name': None, 'requestor': None}
    keys = [k for k in read if k not in ('state', 'name', 'aliases')]
    attrs.update({k: read[k] for k in keys})
    attrs['state_time'] = state_time
    attrs.update(set_attrs)
    d = {'id': attrs.get('id', '0000000042'), 'state': state}
    for k in ('hold_job', 'comment', 'user_data', 'tenant_name', 'requestor'):
        d[k] = attrs[k]
    for k in keys:
        d[k] = attrs[k]
    return d


ZUUL_SYSTEM = '3a9f2c61d8b04e7f95c2a1b0e4d7f6c8'
ZUUL_USER_DATA = {'zuul_system': ZUUL_SYSTEM,
                  'project_name': 'review.example.org/org/repo'}
# Zuul's useNodeSet on a node nodepool fulfilled (allocated to the request)
ZUUL_IN_USE = zuul_node(node(allocated_to='200-0000000042'), 'in-use',
                        1726560300.125, user_data=ZUUL_USER_DATA)
# returnNodeSet on Zuul's own copy (the body it wrote, with id, read back)
ZUUL_USED = zuul_node(ZUUL_IN_USE, 'used', 1726560900.5)
# holdNodeSet: hold_job is " ".join([tenant, project, job, ref_filter])
ZUUL_HOLD = zuul_node(ZUUL_IN_USE, 'hold', 1726560900.5,
                      hold_job='example review.example.org/org/repo tox-py311 .*',
                      comment='debugging a flaky test', hold_expiration=86400)
# _markHeldNodesAsUsed: the state key set in the dict read (state_time as
# it was), then Node.updateFromDict and Node.toDict
_released = dict(ZUUL_HOLD, state='used')
ZUUL_RELEASED = zuul_node(_released, 'used', ZUUL_HOLD['state_time'])
# a static node as Zuul writes it in-use (hostname, slot, no cloud ids)
ZUUL_STATIC_IN_USE = zuul_node(
    node(cloud=None, provider='static-rack', pool='main', type=['small'],
         az=None, region=None, public_ipv4='192.0.2.7', private_ipv4=None,
         public_ipv6=None, host_id=None, interface_ip='192.0.2.7',
         image_id=None, launcher='static driver', external_id='host-a',
         hostname='host-a', resources=None, slot=0, attributes=None,
         allocated_to='100-0000000007'),
    'in-use', 1726560300.25, user_data=ZUUL_USER_DATA)


def zuul_request():
    """NodeRequest.toDict of a request Zuul submits
    (zuul/zk/nodepool.py submitNodeRequest): requestor_data carries the
    saved span (tracing.getSpanInfo: 128-bit trace_id, 64-bit span_id,
    start_time in ns); no declined_by, nodes or reuse."""
    d = {}
    d['requestor_data'] = {
        'build_set_uuid': '7d3f2a1b0c9e4d8fa1b2c3d4e5f60718',
        'tenant_name': 'example',
        'pipeline_name': 'check',
        'job_uuid': '0a1b2c3d4e5f40718293a4b5c6d7e8f9',
        'job_name': 'tox-py311',
        'span_info': {'name': 'RequestNodes',
                      'trace_id': 227905469349181577839468446349154138577,
                      'span_id': 16143534102395214143,
                      'trace_flags': 1,
                      'start_time': 1726560199750123008,
                      'parent': None},
    }
    d['node_types'] = ['ubuntu-jammy', 'ubuntu-jammy']
    d['requestor'] = ZUUL_SYSTEM
    d['created_time'] = 1726560199.750123
    d['provider'] = None
    d['state'] = 'requested'
    d['state_time'] = 1726560199.7498
    d['relative_priority'] = 0
    d['event_id'] = 'c2b8a7e6d5f44e3a9b1c0d2e3f4a5b6c'
    d['tenant_name'] = 'example'
    return d


RECORDS = {
    # --- nodes ---
    'node-ready': node(),
    'node-type-string': drop(node(type='ubuntu-jammy', state='in-use'),
                             'slot', 'driver_data', 'requestor',
                             'tenant_name', 'attributes'),
    'node-ssh-port-only': drop(node(ssh_port=2222), 'connection_port'),
    'node-k8s': node(
        state='ready', cloud=None, az=None, region=None, public_ipv4=None,
        private_ipv4=None, public_ipv6=None, host_id='k8s-worker-1',
        interface_ip='10.96.0.1', connection_type='namespace',
        connection_port={'token': 'ZmFrZS10b2tlbg==', 'ca_crt': 'LS0tLS1C',
                         'user': 'zuul-worker',
                         'namespace': 'zuul-ci-abcdef-0000000042',
                         'host': 'https://k8s.example.com:6443',
                         'skiptls': False},
        ssh_port={'token': 'ZmFrZS10b2tlbg==', 'ca_crt': 'LS0tLS1C',
                  'user': 'zuul-worker',
                  'namespace': 'zuul-ci-abcdef-0000000042',
                  'host': 'https://k8s.example.com:6443',
                  'skiptls': False},
        image_id=None, external_id='zuul-ci-abcdef-0000000042',
        host_keys=[], username=None, python_path=None,
        resources={'cores': 2, 'instances': 1, 'ram': 2048,
                   'ephemeral-storage': 10}),
    'node-hold-string': node(state='hold', hold_job='example org/repo tox',
                             comment='debugging flaky test',
                             hold_expiration='12'),
    'node-hold-nonnumeric': node(state='hold', hold_job='example org/repo tox',
                                 comment='forever', hold_expiration='abc'),
    'node-hold-float': node(state='hold', hold_expiration=12.9),
    'node-hold-int': node(state='hold', hold_job='example org/repo tox',
                          comment='held by autohold', hold_expiration=86400),
    'node-aws': node(cloud='AWS', region='us-east-1', az='us-east-1a',
                     external_id={'instance': 'i-0123456789abcdef0',
                                  'host': 'h-0fedcba9876543210'},
                     resources={'cores': 2, 'instances': 1, 'ram': 4096,
                                'L-1216C47A': 2}),
    'node-int-times': node(state_time=1726560123, created_time=1726560001),
    'node-extra-keys': node(future_field={'nested': [1, 2, {'a': None}]},
                            zuul_extra='kept'),
    'node-minimal': {'state': 'building', 'type': ['ubuntu-jammy'],
                     'provider': 'rax-dfw'},
    'node-metastatic': node(
        provider='meta', pool='main', type=['small-node'], cloud=None,
        external_id='0000000007', slot=1, connection_type='ssh',
        user_data=json.dumps({'backing_node': '0000000007', 'slot': 1}),
        driver_data={'metadata': {'nodepool_node_id': '0000000012'},
                     'backing_node': '0000000007', 'slot': 1,
                     'node': '0000000012'},
        requestor='NodePool:metastatic:meta'),
    'node-zuul-in-use': ZUUL_IN_USE,
    'node-zuul-used': ZUUL_USED,
    'node-zuul-hold': ZUUL_HOLD,
    'node-zuul-released': ZUUL_RELEASED,
    'node-zuul-static-in-use': ZUUL_STATIC_IN_USE,
    # --- requests ---
    'request-zuul': request(),
    'request-zuul-submit': zuul_request(),
    'request-min-ready': request(
        node_types=['ubuntu-jammy'], reuse=False,
        requestor='NodePool:min-ready', requestor_data=None,
        event_id='0d9c8b7a6f5e4d3c2b1a0f9e8d7c6b5a', created_time=None,
        tenant_name=None),
    'request-fulfilled': request(
        state='fulfilled', state_time=1726560260.0625,
        nodes=['0000000001', '0000000002'],
        declined_by=['nl02.example.com-PoolWorker.aws-east-main-'
                     'aa11bb22cc33dd44ee55ff6677889900'],
        provider='rax-dfw', relative_priority=2),
    'request-minimal': {'state': 'requested', 'node_types': ['debian'],
                        'requestor': 'old-zuul', 'x-unknown': 5},
    # --- image builds ---
    'build-ready': build(formats=['vhd', 'qcow2', 'raw']),
    'build-building': build(state='building'),
    'build-legacy': {'state': 'ready', 'state_time': 1500000000.5,
                     'builder': 'nb-old.example.com', 'formats': 'raw,qcow2'},
    # --- image uploads ---
    'upload-ready': upload(),
    'upload-legacy': {'state': 'uploading', 'state_time': 1500000100,
                      'external_id': None, 'external_name': None},
    # --- components ---
    'component-launcher': component('launcher'),
    'component-builder': component('builder', hostname='nb01.example.com',
                                   state='paused'),
    'component-pool': component('pool', paused=True, priority=50),
    'component-pool-old': {'hostname': 'nl00.example.com', 'kind': 'pool',
                           'state': 'running', 'version': '8.0.0',
                           'model_api': 0, 'id': LAUNCHER,
                           'provider_name': 'rax-dfw',
                           'supported_labels': ['ubuntu-jammy']},
}


def main():
    for name, d in sorted(RECORDS.items()):
        sort = name.startswith('component-')
        with open(os.path.join(HERE, name + '.json'), 'w') as f:
            f.write(json.dumps(d, sort_keys=sort))


if __name__ == '__main__':
    main()

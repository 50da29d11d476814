"""Documentation of the `s3` option shared by the snapshot modules
(etcd_runbook/clients/etcd_s3.py s3_argument_spec)."""


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  s3:
    description:
      - An S3-compatible object store (AWS S3, MinIO, versitygw, Ceph RGW, ...) holding the
        snapshots. Talked to with the C(minio) Python package.
      - Credentials are never returned, logged or put into an error message.
    type: dict
    suboptions:
      endpoint:
        description:
          - The store's URL, C(http://host:port) or C(https://host:port), without a path.
        type: str
        required: true
      bucket:
        description:
          - The bucket. It must exist; the modules never create one.
        type: str
        required: true
      region:
        description:
          - The bucket's region (signatures name it; for stores without regions any value
            they accept, usually the default).
        type: str
        default: us-east-1
      access_key:
        description:
          - Access key ID. Default the C(AWS_ACCESS_KEY_ID) environment variable of the
            module's process.
        type: str
      secret_key:
        description:
          - Secret access key. Default the C(AWS_SECRET_ACCESS_KEY) environment variable of
            the module's process.
        type: str
      ca_file:
        description:
          - PEM file of the CA that signed an C(https://) endpoint's certificate. Default the
            C(SSL_CERT_FILE) environment variable, else the certifi bundle.
        type: path
      path_style:
        description:
          - V(true) addresses the bucket in the path (C(https://host/bucket/key)), as MinIO,
            versitygw and most self-hosted stores need; V(false) in the host name
            (C(https://bucket.host/key)).
          - Unset, virtual-hosted style for AWS endpoints and path style for every other.
        type: bool
      validate_certs:
        description:
          - Check an C(https://) endpoint's certificate. Turn off only for tests.
        type: bool
        default: true
"""

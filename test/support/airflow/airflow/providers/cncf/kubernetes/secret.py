"""Secret: a Kubernetes secret's key exposed to the pod (here: as an environment variable)."""


class Secret:
    def __init__(self, deploy_type: str, deploy_target: str, secret: str, key: str | None = None) -> None:
        self.deploy_type = deploy_type
        self.deploy_target = deploy_target
        self.secret = secret
        self.key = key

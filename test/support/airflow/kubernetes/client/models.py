"""The models as attribute holders: V1Pod(metadata=..., status=...) and so on, fields as the client names them."""


class _Model:
    def __init__(self, **fields) -> None:
        self.__dict__.update(fields)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.__dict__})"


class V1ResourceRequirements(_Model): ...


class V1ObjectMeta(_Model): ...


class V1Pod(_Model): ...


class V1PodStatus(_Model): ...


class V1ContainerStatus(_Model): ...


class V1ContainerState(_Model): ...


class V1ContainerStateTerminated(_Model): ...

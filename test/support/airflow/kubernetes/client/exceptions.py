class ApiException(Exception):
    """An API call's failure, with its HTTP status (404: no such object)."""

    def __init__(self, status: int = 0, reason: str = "") -> None:
        super().__init__(f"({status})\nReason: {reason}")
        self.status = status
        self.reason = reason

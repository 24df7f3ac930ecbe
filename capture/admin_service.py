"""The `cdc.v1.ChangefeedService` servicer: the admin API any capture answers.

Reads come straight from etcd, through the functions the owner and the
processors read with (``ChangefeedStore``, ``read_tables``, ``SnapshotProgress``);
writes go through ``ChangefeedStore`` (etcd compare-and-swaps that the owner
follows), so no request needs the owner.
Create and update refuse password references the server would not resolve
(``capture.secret_refs``); create then checks the source and the sink before
anything is written (``capture.changefeed_checks``). Errors become status codes:

    ConfigError (bad URI, bad config,        INVALID_ARGUMENT  "<field>: <message>"
      a password reference not lent)
    InvalidKeyError (an id etcd cannot hold) INVALID_ARGUMENT
    ChangefeedNotFound                       NOT_FOUND
    ChangefeedExists                         ALREADY_EXISTS
    NotStopped, InvalidTransition, checks,   FAILED_PRECONDITION
      DdlNotPending (ddl skip / replace)
    StoreUnavailable / other StoreError      UNAVAILABLE
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

import grpc

from capture.access import AccessTokens
from capture.changefeed_checks import PreconditionFailed, check_changefeed
from capture.history_messages import ddl_decision, failed_ddl, history_messages
from capture.identity import actor_of
from capture.secret_refs import check_password_refs
from capture.snapshot_requests import RequestRefused, request_snapshot, resnapshot_message
from capture.tables_update import await_tables_update, check_tables_update
from cdc.api.gen.cdc.v1 import admin_pb2, admin_pb2_grpc
from cdc.changefeed import (
    Changefeed,
    ChangefeedExists,
    ChangefeedNotFound,
    ChangefeedStatus,
    ChangefeedStore,
    InvalidTransition,
    NotStopped,
    read_tables,
)
from cdc.changefeed.ddl_decision import DdlAction
from cdc.changefeed.ddl_ops import DdlNotPending, decide_ddl
from cdc.changefeed.history import history_of, record
from cdc.changefeed.snapshot_progress import SnapshotProgress
from cdc.changefeed.snapshot_request import SnapshotRequests
from cdc.changefeed.source_record import SourceRecord
from cdc.changefeed.store import check_update
from cdc.changefeed.table_update import TablesUpdate, TablesUpdateResult
from cdc.config import ChangefeedConfig
from cdc.errors import ConfigError
from cdc.logs import get_logger
from cdc.masking import mask_secret
from cdc.model.schema import TableName
from cdc.store import EtcdStore, StoreError
from cdc.store.keys import CaptureKey, InvalidKeyError, split_table
from cdc.uri.secrets import SecretPolicy, current_policy

_CODES: tuple[tuple[type[Exception], grpc.StatusCode], ...] = (
    (ConfigError, grpc.StatusCode.INVALID_ARGUMENT),
    (InvalidKeyError, grpc.StatusCode.INVALID_ARGUMENT),
    (ChangefeedNotFound, grpc.StatusCode.NOT_FOUND),
    (ChangefeedExists, grpc.StatusCode.ALREADY_EXISTS),
    (NotStopped, grpc.StatusCode.FAILED_PRECONDITION),
    (InvalidTransition, grpc.StatusCode.FAILED_PRECONDITION),
    (PreconditionFailed, grpc.StatusCode.FAILED_PRECONDITION),
    (RequestRefused, grpc.StatusCode.FAILED_PRECONDITION),
    (DdlNotPending, grpc.StatusCode.FAILED_PRECONDITION),
    (StoreError, grpc.StatusCode.UNAVAILABLE),
)


_SERVICE = "/cdc.v1.ChangefeedService/"
_ID_MAX = 128
_MESSAGE_MAX = 2000


class ChangefeedServicer(admin_pb2_grpc.ChangefeedServiceServicer):
    """``secrets``: what password references may name (default: this process's policy);
    ``tokens``: the server's tokens, to tell the audit history the caller's role."""

    def __init__(
        self,
        store: EtcdStore,
        check: Callable[[ChangefeedConfig], SourceRecord | None] = check_changefeed,
        secrets: SecretPolicy | None = None,
        tokens: AccessTokens | None = None,
    ) -> None:
        self.store = store
        self.changefeeds = ChangefeedStore(store)
        self._check = check
        self._secrets = secrets
        self._tokens = tokens or AccessTokens()
        self.log = get_logger(__name__)

    def _record(
        self,
        context: grpc.ServicerContext,
        method: str,
        changefeed_id: str,
        detail: dict[str, str] | None = None,
    ) -> None:
        """The history entry of a successful operation (``method``'s op name). A store
        failure here is logged, not answered: the operation is done, and a retried call
        would repeat it."""
        op = _OPS[method]
        who = actor_of(context, self._tokens, _SERVICE + method)
        try:
            record(self.store, changefeed_id, op, who, detail)
        except StoreError as exc:
            self.log.error(
                "changefeed %s: %s by %s done but not recorded in its history: %s",
                changefeed_id,
                op,
                who,
                exc,
            )

    #: The checks of the tables new rules add (``capture.tables_update``; tests replace it).
    tables_check = staticmethod(check_tables_update)

    # --- writes --------------------------------------------------------------------------------

    def CreateChangefeed(  # gRPC method name
        self, request: admin_pb2.CreateChangefeedRequest, context: grpc.ServicerContext
    ) -> admin_pb2.Changefeed:
        with _status(context):
            config = _config(request.config)
            config.check_storable()
            check_password_refs(config, self._policy())
            source = self._check(config)
            cf = self.changefeeds.create(config, source)
            self.log.info("changefeed %s created", cf.changefeed_id)
            self._record(context, "CreateChangefeed", cf.changefeed_id, _summary(config))
            return self._message(cf, tables=False)

    def UpdateChangefeed(  # gRPC method name
        self, request: admin_pb2.UpdateChangefeedRequest, context: grpc.ServicerContext
    ) -> admin_pb2.Changefeed:
        with _status(context):
            config = _config(request.config)
            check_password_refs(config, self._policy())
            no_backfill = request.no_backfill
            current = self.changefeeds.get(config.changefeed_id)
            check_update(current, config, no_backfill=no_backfill)  # refused before any check
            if current.config.table_rules_changed(config):
                self.tables_check(self.store, current, config, no_backfill)
            cf = self.changefeeds.update(config, no_backfill=no_backfill)
            self.log.info("changefeed %s updated", cf.changefeed_id)
            detail = _summary(config)
            result = None
            if cf.status.tables_update is not None:
                cf, result = await_tables_update(
                    self.changefeeds, cf.changefeed_id, cf.status.tables_update.id
                )
                detail["tables"] = result.summary() if result else "waiting for the owner"
            self._record(context, "UpdateChangefeed", cf.changefeed_id, detail)
            if result is not None and result.error is not None:
                raise PreconditionFailed(f"filter.rules: {result.summary()}")
            return self._message(cf, tables=False)

    def PauseChangefeed(  # gRPC method name
        self, request: admin_pb2.ChangefeedRef, context: grpc.ServicerContext
    ) -> admin_pb2.Changefeed:
        with _status(context):
            status = self.changefeeds.pause(_id(request))
            self._record(context, "PauseChangefeed", request.changefeed_id, _state(status))
            return self._message(self.changefeeds.get(request.changefeed_id), tables=False)

    def ResumeChangefeed(  # gRPC method name
        self, request: admin_pb2.ChangefeedRef, context: grpc.ServicerContext
    ) -> admin_pb2.Changefeed:
        with _status(context):
            status = self.changefeeds.resume(_id(request))
            self._record(context, "ResumeChangefeed", request.changefeed_id, _state(status))
            return self._message(self.changefeeds.get(request.changefeed_id), tables=False)

    def RemoveChangefeed(  # gRPC method name
        self, request: admin_pb2.ChangefeedRef, context: grpc.ServicerContext
    ) -> admin_pb2.RemoveChangefeedResponse:
        with _status(context):
            self.changefeeds.remove(_id(request))
            self.log.info("changefeed %s removed", request.changefeed_id)
            self._record(context, "RemoveChangefeed", request.changefeed_id)
            return admin_pb2.RemoveChangefeedResponse(changefeed_id=request.changefeed_id)

    def SkipDdl(  # gRPC method name
        self, request: admin_pb2.DdlDecisionRequest, context: grpc.ServicerContext
    ) -> admin_pb2.Changefeed:
        return self._decide(request, context, DdlAction.SKIP, "SkipDdl")

    def ReplaceDdl(  # gRPC method name
        self, request: admin_pb2.DdlDecisionRequest, context: grpc.ServicerContext
    ) -> admin_pb2.Changefeed:
        return self._decide(request, context, DdlAction.REPLACE, "ReplaceDdl")

    def _decide(
        self,
        request: admin_pb2.DdlDecisionRequest,
        context: grpc.ServicerContext,
        action: DdlAction,
        method: str,
    ) -> admin_pb2.Changefeed:
        """The decision and its history entry in one transaction (``cdc.changefeed.ddl_ops``)."""
        with _status(context):
            cid = _id(admin_pb2.ChangefeedRef(changefeed_id=request.changefeed_id))
            who = actor_of(context, self._tokens, _SERVICE + method)
            decide_ddl(self.store, cid, action, request.position, request.sql, who)
            return self._message(self.changefeeds.get(cid), tables=False)

    def SnapshotTable(  # gRPC method name
        self, request: admin_pb2.SnapshotTableRequest, context: grpc.ServicerContext
    ) -> admin_pb2.Changefeed:
        """A re-snapshot of a streaming table (``capture.snapshot_requests``: the checks)."""
        with _status(context):
            cid = _id(admin_pb2.ChangefeedRef(changefeed_id=request.changefeed_id))
            who = actor_of(context, self._tokens, _SERVICE + "SnapshotTable")
            asked = request_snapshot(
                self.store, self.changefeeds, cid, request.table, request.where, str(who)
            )
            detail = {"table": str(asked.table), "request": asked.request_id}
            if asked.where is not None:
                detail["where"] = asked.where
            self._record(context, "SnapshotTable", cid, detail)
            return self._message(self.changefeeds.get(cid), tables=True)

    def _policy(self) -> SecretPolicy:
        return self._secrets if self._secrets is not None else current_policy()

    # --- reads ---------------------------------------------------------------------------------

    def GetChangefeed(  # gRPC method name
        self, request: admin_pb2.ChangefeedRef, context: grpc.ServicerContext
    ) -> admin_pb2.Changefeed:
        with _status(context):
            return self._message(self.changefeeds.get(_id(request)), tables=True)

    def ListChangefeeds(  # gRPC method name
        self, request: admin_pb2.ListChangefeedsRequest, context: grpc.ServicerContext
    ) -> admin_pb2.ListChangefeedsResponse:
        with _status(context):
            return admin_pb2.ListChangefeedsResponse(
                changefeeds=[self._message(cf, tables=False) for cf in self.changefeeds.list()]
            )

    def ListCaptures(  # gRPC method name
        self, request: admin_pb2.ListCapturesRequest, context: grpc.ServicerContext
    ) -> admin_pb2.ListCapturesResponse:
        with _status(context):
            owner = self.store.get(self.store.keys.owner())
            owner_id = owner.json().get("capture_id") if owner else None
            captures = []
            for item in self.store.get_prefix(self.store.keys.prefix_of(CaptureKey)):
                info = item.json()
                captures.append(
                    admin_pb2.Capture(
                        id=str(info.get("id", "")),
                        address=str(info.get("address", "")),
                        version=str(info.get("version", "")),
                        started_at=float(info.get("started_at") or 0.0),
                        is_owner=info.get("id") == owner_id,
                    )
                )
            captures.sort(key=lambda c: (not c.is_owner, c.id))
            return admin_pb2.ListCapturesResponse(captures=captures)

    # --- messages ------------------------------------------------------------------------------

    def _message(self, cf: Changefeed, *, tables: bool) -> admin_pb2.Changefeed:
        status = cf.status
        error = "" if status.error is None else mask_secret(status.error.message)
        return admin_pb2.Changefeed(
            changefeed_id=cf.changefeed_id,
            config=admin_pb2.ChangefeedConfigJson(json=json.dumps(cf.config.to_dict(mask=True))),
            status=admin_pb2.ChangefeedStatus(
                state=status.state.value,
                checkpoint=_text(status.checkpoint),
                resolved=_text(status.resolved),
                error=error,
                updated_at=status.updated_at,
                skipped_ddl=[
                    admin_pb2.SkippedDdl(
                        position=str(s.position),
                        kind=s.kind,
                        statement=mask_secret(s.statement),
                        reason=mask_secret(s.reason),
                        at=s.at,
                    )
                    for s in status.skipped_ddl
                ],
                source_json="" if status.source is None else json.dumps(status.source.to_dict()),
                last_tables_update_json=_json(status.last_tables_update),
                pending_tables_update_json=_json(status.tables_update),
                failed_ddl=failed_ddl(status),
                ddl_decision=ddl_decision(status),
            ),
            tables=self._tables(cf.changefeed_id) if tables else [],
            history=history_messages(history_of(self.store, cf.changefeed_id)) if tables else [],
        )

    def _tables(self, changefeed_id: str) -> list[admin_pb2.TableStatus]:
        progress = SnapshotProgress(self.store, changefeed_id)
        asked = {str(r.table): r for r in SnapshotRequests(self.store, changefeed_id).all()}
        out = []
        for table, entry in read_tables(self.store, changefeed_id).items():
            task, record = entry.task, entry.record
            snap = progress.table_progress(TableName(*split_table(table)))
            out.append(
                admin_pb2.TableStatus(
                    table=table,
                    capture_id=task.capture_id if task else "",
                    state=record.state.value if record else "",
                    checkpoint=_text(entry.checkpoint if record else None),
                    error=mask_secret(record.error) if record and record.error else "",
                    updated_at=entry.updated_at,
                    snapshot=admin_pb2.SnapshotProgress(
                        chunks_done=snap.chunks_done,
                        chunks_total=snap.chunks_total,
                        rows=snap.rows,
                        rows_per_second=snap.rows_per_second or 0.0,
                    ),
                    resnapshot=resnapshot_message(asked.get(table)),
                )
            )
        return out


#: The history's name of each operation that records itself after it succeeded.
_OPS = {
    "CreateChangefeed": "create",
    "UpdateChangefeed": "update",
    "PauseChangefeed": "pause",
    "ResumeChangefeed": "resume",
    "RemoveChangefeed": "remove",
    "SnapshotTable": "snapshot",
}


def _summary(config: ChangefeedConfig) -> dict[str, str]:
    """What a create or update set, as the history shows it (masked there)."""
    return {"sink-uri": str(config.sink_uri), "rules": ", ".join(config.rules)}


def _state(status: ChangefeedStatus) -> dict[str, str]:
    return {"state": status.state.value}


def _json(value: TablesUpdate | TablesUpdateResult | None) -> str:
    return "" if value is None else json.dumps(value.to_dict())


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _id(request: admin_pb2.ChangefeedRef) -> str:
    cid = request.changefeed_id
    if not cid:
        raise ConfigError("changefeed-id", "is empty; give the id of a changefeed")
    if len(cid) > _ID_MAX:
        # no changefeed has such an id (ChangefeedConfig allows 128 characters); etcd would
        # refuse the key only after retries
        raise ConfigError(
            "changefeed-id", f"is {len(cid)} characters long; ids have at most {_ID_MAX}"
        )
    return cid


def _config(message: admin_pb2.ChangefeedConfigJson) -> ChangefeedConfig:
    if not message.json:
        raise ConfigError("config", "is empty; send ChangefeedConfig.to_dict(mask=False) as JSON")
    try:
        data = json.loads(message.json)
    except json.JSONDecodeError as exc:
        raise ConfigError("config", f"is not valid JSON ({exc})") from None
    return ChangefeedConfig.from_dict(data)


@contextmanager
def _status(context: grpc.ServicerContext) -> Iterator[None]:
    """Turns the lifecycle's exceptions into status codes with their (masked) message."""
    try:
        yield
    except Exception as exc:
        for kind, code in _CODES:
            if isinstance(exc, kind):
                _abort(context, code, str(exc))
        raise


def _abort(context: grpc.ServicerContext, code: grpc.StatusCode, message: str) -> NoReturn:
    if len(message) > _MESSAGE_MAX:  # an error quoting a huge value: the status must still fit
        cut = len(message) - _MESSAGE_MAX
        message = f"{message[:_MESSAGE_MAX]}... ({cut} more characters)"
    context.abort(code, mask_secret(message))
    raise AssertionError("context.abort returns only by raising")

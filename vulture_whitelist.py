"""Names `vulture` (the dead-code gate of `make gates`) would report as unused, and why each stays.

Vulture reads only Python and matches by name: it cannot see Django, Celery, Channels or the
standard library calling a method or reading an attribute by its name, nor a template reading a
property. Each line below marks one such name as used, with the caller. What is decorated as an
entry point (`@admin.register`, `@admin.action`, `@admin.display`, `@register`, `@receiver`,
`@shared_task`, a signal's `@….connect`) is left out by the gate's `--ignore-decorators`, and
`hermes_web/settings.py` by its `--exclude` (Django reads every name in it).

A name that is really dead is deleted, never added here.
"""
# ruff: noqa: B018  (each line is an attribute read that vulture counts as a use; nothing runs it)
from vulture.whitelist_utils import Whitelist

_ = Whitelist()

# Django models, forms and fields: options and hooks Django reads by name.
_.Meta  # the options class of models and model forms
_.abstract  # Meta: a model base class with no table
_.ordering  # Meta
_.indexes  # Meta
_.verbose_name_plural  # Meta
_.required  # a form field's flag, set on the instance in a form's __init__
_.widget  # a form field's widget, set on the instance in a form's __init__
_.format_value  # a widget's hook: the value shown in the input
_.from_db_value  # a model field's hook: the value read from the database
_.expression  # from_db_value's argument, in Django's signature
_.adding  # Model._state.adding: Django decides between INSERT and UPDATE by it
_.clear_api_key  # a form field: the admin's fieldsets name it, clean() reads cleaned_data["clear_api_key"]
_.clear_env  # a form field: the MCP server admin's fieldsets name it, clean() reads cleaned_data[f"clear_{name}"]
_.clear_headers  # a form field: as clear_env

# Django admin: ModelAdmin options and hooks Django reads or calls by name.
_.list_display  # option: the change list's columns
_.list_editable  # option: columns edited in the change list
_.list_filter  # option: the change list's filters
_.list_select_related  # option: the change list's query
_.search_fields  # option: the change list's search
_.date_hierarchy  # option: the change list's date links
_.autocomplete_fields  # option: foreign keys chosen by search
_.save_as  # option: "Save as new"
_.change_form_template  # option: the form page's template
_.change_list_template  # option: the list page's template
_.get_fieldsets  # hook: the form's sections
_.get_readonly_fields  # hook: fields shown but not edited
_.has_module_permission  # hook: who sees the app in the index
_.has_view_permission  # hook: who sees the model
_.has_delete_permission  # hook: who may delete
_.save_model  # hook: how the form's object is saved
_.delete_model  # hook: how one object is deleted
_.delete_queryset  # hook: how the "delete selected" action deletes

# Django entry points named by a dotted path or a convention.
_.Command  # a management command: `manage.py <module name>`
_.add_arguments  # BaseCommand's hook for the command's options
_.requires_system_checks  # BaseCommand option
_.urlpatterns  # ROOT_URLCONF and every include()
_.app_name  # the URL namespace of an include()
_.app_configs  # a system check's argument, in Django's signature
_.HermesWebConfig  # INSTALLED_APPS
_.AgentSessionsConfig  # INSTALLED_APPS
_.StaffConfig  # INSTALLED_APPS
_.RequestSizeLimitMiddleware  # MIDDLEWARE
_.lockout_response  # AXES_LOCKOUT_CALLABLE
_.env_bool  # called by hermes_web/settings.py, which the gate does not read
_.channel_layers  # called by hermes_web/settings.py, which the gate does not read

# ASGI, Channels and Celery.
_.application  # ASGI_APPLICATION (hermes_web.asgi:application)
_.HermesChannelLayer  # CHANNEL_LAYERS' BACKEND
_.create_pool  # channels_redis' hook, overridden by HermesChannelLayer
_.disconnect  # a websocket consumer's handler, called by Channels
_.receive  # a websocket consumer's handler, called by Channels
_.text_data  # receive()'s argument, in Channels' signature
_.bytes_data  # receive()'s argument, in Channels' signature
_.conversation_event  # the handler of group events of type "conversation.event"
_.settings_changed  # the handler of group events of type "settings.changed"
_.RedisTransport  # kombu's TRANSPORT_ALIASES ("hermes_web.celery:RedisTransport")
_.collect  # a Prometheus collector's hook, called by the registry on every /metrics scrape

# The standard library and Daphne, calling by name.
_.do_GET  # http.server's request handler (the simulator)
_.do_POST  # http.server's request handler (the simulator)
_.protocol_version  # http.server's handler option: HTTP/1.1 keep-alive
_.disable_nagle_algorithm  # socketserver's handler option
_.daemon_threads  # socketserver's server option
_.allow_reuse_address  # socketserver's server option
_.request_queue_size  # socketserver's server option
_.server_class  # Daphne's CommandLineInterface option
_.maxlevel  # reprlib.Repr's limits (compression/core/settings_validate.py)
_.maxlist  # reprlib.Repr
_.maxtuple  # reprlib.Repr
_.maxdict  # reprlib.Repr
_.maxset  # reprlib.Repr
_.maxstring  # reprlib.Repr
_.maxother  # reprlib.Repr
_.mtime  # tarfile.TarInfo: the time a member is stored with (sessions/services/backup.py)
_.__path__  # what makes a module a package for the import system (plugin namespace)

# Read by templates.
_.shown_text  # Turn: templates/sessions/_queued.html
_.phase_label  # CompressionEvent: templates/sessions/_event_feed.html
_.snippet_html  # a search hit: templates/sessions/recall/_results.html, sidebar/_results.html
_.not_worth_reason  # a compression draft: templates/sessions/recall/preview.html
_.aux_provider  # Feasibility: templates/staff/dashboard.html
_.aux_model  # Feasibility: templates/staff/dashboard.html; also a CompressionEvent column
_.used_text  # a usage line: templates/sessions/_usage_lines.html, templates/staff/dashboard.html
_.limit_text  # a usage line: as used_text
_.resets  # a usage line: templates/sessions/_usage_lines.html
_.messages_month  # a user's usage row: templates/staff/dashboard.html
_.own_limits  # a user's usage row: templates/staff/dashboard.html

# Database columns written through the ORM and shown by the admin, exports or templates.
_.end_reason  # Session
_.duration_ms  # CompressionEvent
_.cache_write_tokens  # ApiCall
_.cache_write_5m_tokens  # ApiCall
_.cache_write_1h_tokens  # ApiCall
_.cost_without_cache  # ApiCall
_.shown_at  # UserNotice
_.samples  # ModelTokenRatio
_.updated_at  # ModelTokenRatio
_.created_by  # ShareLink
_.checked_at  # MCPServer
_.codex_app_server_auto  # a setting stored, validated, edited in the admin and in config.yaml (SPEC §9)

# Interfaces for code outside this repository.
_.RecentFocusCompressor  # an example plugin engine, found by the registry as a ContextEngine subclass
_.is_available  # ContextEngine's interface (Hermes' plugins implement and call it)
_.on_session_start  # ContextEngine's interface
_.on_session_end  # ContextEngine's interface
_.on_session_reset  # ContextEngine's interface
_.has_content_to_compress  # ContextEngine's interface
_.update_model  # ContextEngine's interface
_.openai_base_url  # the simulator's address for OpenAI-compatible clients (tests and benches)
_.pygments_css  # run by hand to regenerate static/css/pygments.css (docs/operations.md)

# Asked for by the SPEC, with no caller in the product.
_.compact_thread  # CodexAppServerDecision: SPEC §9 asks for the decision, unit-tested, though no route uses it
_.estimate_request_tokens_rough  # SPEC §3.1 names it with the other rough estimates (tests/core/test_tokens.py)

# Part of a result, or a tool that benches and tests use to check or drive the product.
_.idle_seconds  # TimingDecision: the pause it measured (tests/core/test_compaction_timing.py)
_.tool_pair_problems  # the tool-pairing invariant core tests check every compacted history against
_.with_token_count  # stores a message's count as the web layer does (bench/engine_scaling.py, tests)
_.injected  # sessions.services.clock: benches and tests run the product on the simulator's clock
_.FINISHED  # Turn's finished statuses: the browser tests wait on them
_.stream_deltas  # sessions.live: several streams' deltas in one batch, the worker fan-out benchmark's round (bench/fanout_tasks.py)
_.channel_redis_urls  # hermes_web/settings.py (left out of the scan) builds CHANNEL_LAYERS with it
_.arg_joiner  # Django's Func API: read by the ORM when it compiles sessions.selectors' SQL function
_.output_field  # Django's Func API: the SQL function's result type, read by the ORM
_.dispatch  # sessions.consumers: a consumer's message dispatch, overridden (called by Channels)
_.websocket_disconnect  # sessions.consumers: the handler of "websocket.disconnect", overridden (called by Channels)

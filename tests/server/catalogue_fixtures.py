"""A large, varied, deterministic catalogue (20 business domains x 15 jobs = 300 workflows) and 52 labelled
queries in the words a model would use, for the large-catalogue tests and bench/catalogue.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Domain:
    key: str
    things: str  # what the workflows of this domain work on, as prose
    source: str  # where those things live
    tags: tuple[str, ...]
    inputs: tuple[tuple[str, str, str], ...]  # (name, JSON type, description); the first is required


@dataclass(frozen=True, slots=True)
class Job:
    key: str
    phrasings: tuple[str, str]  # description templates ({things}, {source}); one per workflow, by position
    tags: tuple[str, ...]
    inputs: tuple[tuple[str, str, str], ...]


DOMAINS: tuple[Domain, ...] = (
    Domain("invoice", "vendor invoices", "from the accounts-payable inbox", ("finance", "billing", "accounts payable"),
           (("period", "string", "Month to cover, e.g. 2026-03"), ("vendor", "string", "Only this supplier"))),
    Domain("ticket", "customer support tickets", "from the helpdesk queue", ("support", "helpdesk", "customer service"),
           (("queue", "string", "Helpdesk queue name"), ("since", "string", "Oldest ticket date"))),
    Domain("contract", "legal contracts and agreements", "stored in the document vault", ("legal", "compliance"),
           (("contract_id", "string", "The contract to work on"), ("counterparty", "string", "The other party"))),
    Domain("lead", "sales leads", "in the CRM", ("sales", "crm", "pipeline"),
           (("segment", "string", "Market segment"), ("owner", "string", "Account executive"))),
    Domain("order", "e-commerce orders", "from the online shop", ("ecommerce", "retail", "checkout"),
           (("order_ids", "array", "Orders to process"), ("store", "string", "Shop front"))),
    Domain("shipment", "shipments and parcels", "tracked with the carriers", ("logistics", "delivery", "carrier"),
           (("tracking_numbers", "array", "Carrier tracking numbers"), ("carrier", "string", "UPS, DHL, ..."))),
    Domain("employee", "employee records", "in the HR system", ("hr", "people", "payroll"),
           (("department", "string", "Team or department"), ("employee_id", "string", "One employee"))),
    Domain("candidate", "job applicants and their résumés", "from the applicant tracking system",
           ("recruiting", "hiring", "hr"),
           (("job_id", "string", "The opening"), ("resume_urls", "array", "Links to résumés"))),
    Domain("expense", "expense reports and receipts", "submitted by staff", ("finance", "reimbursement", "travel"),
           (("month", "string", "Reporting month"), ("employee_email", "string", "Whose expenses"))),
    Domain("log", "application and server logs", "from the log aggregator", ("ops", "observability", "errors"),
           (("service", "string", "Service name"), ("time_range", "string", "e.g. last 24h"))),
    Domain("incident", "production incidents and outages", "from the on-call pager", ("sre", "on-call", "postmortem"),
           (("incident_id", "string", "Pager incident id"), ("severity", "string", "SEV1 to SEV4"))),
    Domain("review", "customer product reviews and ratings", "from the storefront and app stores",
           ("feedback", "sentiment", "product"),
           (("product_sku", "string", "The product"), ("min_rating", "integer", "Lowest star rating kept"))),
    Domain("campaign", "marketing email campaigns", "run through the newsletter platform",
           ("marketing", "newsletter", "email"),
           (("campaign_id", "string", "The campaign"), ("audience", "string", "Mailing list"))),
    Domain("inventory", "stock levels and SKUs", "in the warehouse management system",
           ("warehouse", "stock", "supply chain"),
           (("warehouse", "string", "Site code"), ("sku_list", "array", "Items to look at"))),
    Domain("patient", "patient intake forms", "from the clinic portal", ("healthcare", "clinical", "medical"),
           (("clinic", "string", "Clinic id"), ("visit_date", "string", "Day of the visit"))),
    Domain("transaction", "bank card transactions", "from the payments ledger", ("payments", "banking", "fraud"),
           (("account_id", "string", "Bank account"), ("date_from", "string", "First day"))),
    Domain("meeting", "meeting transcripts and notes", "recorded in video calls", ("meetings", "notes", "collaboration"),
           (("meeting_url", "string", "Recording link"), ("attendees", "array", "Who was there"))),
    Domain("article", "news articles and blog posts", "from RSS feeds", ("content", "news", "publishing"),
           (("feed_url", "string", "The feed"), ("topic", "string", "Subject filter"))),
    Domain("commit", "git commits and pull requests", "in the code repository", ("engineering", "git", "code review"),
           (("repo", "string", "owner/name"), ("branch", "string", "Branch name"))),
    Domain("survey", "survey responses", "collected from questionnaires", ("research", "nps", "feedback"),
           (("survey_id", "string", "The survey"), ("question", "string", "One question only"))),
)

JOBS: tuple[Job, ...] = (
    Job("summarize", ("Summarize {things} {source} into a short digest: key figures, outliers and what needs "
                      "attention.", "Write a brief overview of {things} {source}, highlighting the main points."),
        ("reporting", "digest"), (("max_words", "integer", "Length of the digest"),)),
    Job("translate", ("Translate {things} {source} into another language, keeping names and numbers intact.",
                      "Render {things} in the target language (machine translation with a glossary)."),
        ("localization", "language"), (("target_language", "string", "ISO code, e.g. es or de"),)),
    Job("validate", ("Check {things} {source} against the rules: missing fields, wrong formats and inconsistent "
                     "totals.", "Validate {things}: report every record that fails a schema or business rule."),
        ("quality", "checks"), (("strict", "boolean", "Fail on warnings too"),)),
    Job("export", ("Export {things} {source} to a CSV file or a Google Sheets spreadsheet.",
                   "Write {things} out as a spreadsheet (CSV or XLSX) for analysis."),
        ("csv", "spreadsheet"), (("format", "string", "csv or xlsx"), ("destination", "string", "Folder or sheet"))),
    Job("import", ("Import {things} from an uploaded CSV or JSON file, mapping columns to fields.",
                   "Load {things} from a file into the system, creating or updating records."),
        ("ingest", "upload"), (("file_path", "string", "The file to read"),
                               ("dry_run", "boolean", "Only report what would change"))),
    Job("dedupe", ("Find and merge duplicate {things} {source}, keeping the most complete record.",
                   "Remove duplicated entries among {things} using fuzzy matching."),
        ("cleanup", "data quality"), (("threshold", "number", "Similarity above which two records are one"),)),
    Job("classify", ("Sort {things} {source} into categories with an LLM and label each one.",
                     "Tag and categorize {things} by topic."),
        ("labeling", "triage"), (("categories", "array", "Allowed labels"),)),
    Job("forecast", ("Forecast {things} for the coming weeks from their history, with a confidence range.",
                     "Predict future volumes of {things} and flag expected peaks."),
        ("prediction", "planning"), (("horizon_days", "integer", "How far ahead"),)),
    Job("alert", ("Watch {things} {source} and send a Slack or email alert when a threshold is crossed.",
                  "Notify the team on Slack when {things} look unusual."),
        ("monitoring", "notifications"), (("channel", "string", "Slack channel or email"),
                                          ("limit_value", "number", "When to alert"))),
    Job("search", ("Search {things} {source} by keyword and filters and return the best matches.",
                   "Look up {things} matching a free-text query."),
        ("lookup", "query"), (("query", "string", "What to look for"), ("limit", "integer", "How many results"))),
    Job("compare", ("Compare two sets of {things} side by side and list what changed.",
                    "Diff {things} between two periods and explain the differences."),
        ("diff", "analysis"), (("baseline", "string", "The earlier set"), ("current", "string", "The later set"))),
    Job("archive", ("Move old {things} {source} to cold storage and delete them from the live system.",
                    "Archive {things} older than a cutoff date into compressed files."),
        ("retention", "storage"), (("older_than_days", "integer", "Age cutoff"),)),
    Job("redact", ("Redact personal data (names, emails, phone numbers) from {things} before sharing.",
                   "Anonymize {things}: mask PII so the data can leave the team."),
        ("privacy", "gdpr", "pii"), (("fields", "array", "Which fields to mask"),)),
    Job("enrich", ("Enrich {things} {source} with extra details looked up from public sources and internal APIs.",
                   "Add missing information to {things}, such as company, location and size."),
        ("augmentation", "lookup"), (("sources", "array", "Where to look"),)),
    Job("audit", ("Audit {things} {source} for policy violations and produce a compliance report.",
                  "Review {things} for anomalies and keep an audit trail of findings."),
        ("compliance", "review"), (("policy", "string", "Which policy to check"),)),
)


def workflow_name(domain: Domain, job: Job) -> str:
    """Real catalogues name things inconsistently: three naming habits, by position."""
    habit = (DOMAINS.index(domain) + JOBS.index(job)) % 3
    if habit == 0:
        return f"{domain.key}_{job.key}"
    if habit == 1:
        return f"{job.key}_{domain.key}s"
    return f"{domain.key}s_{job.key}_flow"


def blueprint(domain: Domain, job: Job) -> dict[str, Any]:
    """One runnable workflow: a single `echo` of its first input (the test orchestrator's tool)."""
    position = DOMAINS.index(domain) + JOBS.index(job)
    description = job.phrasings[position % 2].format(things=domain.things, source=domain.source)
    fields = domain.inputs + job.inputs
    first = fields[0][0]
    properties = {name: ({"type": kind, "description": text} if kind != "array"
                         else {"type": "array", "items": {"type": "string"}, "description": text})
                  for name, kind, text in fields}
    return {
        "name": workflow_name(domain, job),
        "description": description,
        "inputs": {"type": "object", "properties": properties, "required": [first]},
        "outputs": {"echoed": "{{ run.value }}"},
        "metadata": {"tags": [*domain.tags, *job.tags]},
        "nodes": [{"id": "run", "type": "tool", "tool_name": "echo", "tool_args": {"value": f"{{{{ inputs.{first} }}}}"}}],
    }


def catalogue() -> list[dict[str, Any]]:
    """The 300 blueprints, in a fixed order."""
    return [blueprint(domain, job) for domain in DOMAINS for job in JOBS]


def name_of(domain: str, job: str) -> str:
    return workflow_name(next(d for d in DOMAINS if d.key == domain), next(j for j in JOBS if j.key == job))


# (what a user asks, in a model's words, not the workflow's name) -> (domain, job) it wants. Written by hand.
LABELLED: tuple[tuple[str, tuple[str, str]], ...] = (
    ("give me a short digest of this month's supplier invoices", ("invoice", "summarize")),
    ("translate the helpdesk tickets into German", ("ticket", "translate")),
    ("check our contracts for missing clauses and bad dates", ("contract", "validate")),
    ("put all the leads from the CRM into a spreadsheet", ("lead", "export")),
    ("load a CSV of orders into the shop", ("order", "import")),
    ("merge duplicate employee records", ("employee", "dedupe")),
    ("label incoming resumes by job category", ("candidate", "classify")),
    ("predict next quarter's travel expenses", ("expense", "forecast")),
    ("ping the on-call channel on Slack when error logs spike", ("log", "alert")),
    ("write up a summary of last night's outage", ("incident", "summarize")),
    ("find reviews that mention battery problems", ("review", "search")),
    ("compare this newsletter's results with the previous one", ("campaign", "compare")),
    ("which SKUs will run low on stock next month", ("inventory", "forecast")),
    ("strip personal information from patient intake forms", ("patient", "redact")),
    ("review card payments for fraud and policy breaches", ("transaction", "audit")),
    ("notes from the weekly meeting, summarized", ("meeting", "summarize")),
    ("sort blog posts by topic", ("article", "classify")),
    ("check pull requests for policy violations", ("commit", "audit")),
    ("export survey answers to excel", ("survey", "export")),
    ("archive support tickets older than a year", ("ticket", "archive")),
    ("add company size and industry to each sales lead", ("lead", "enrich")),
    ("look up an order by customer name", ("order", "search")),
    ("where is my parcel? find shipments by tracking number", ("shipment", "search")),
    ("remove duplicate survey submissions", ("survey", "dedupe")),
    ("translate the contract into French", ("contract", "translate")),
    ("bulk upload new hires from a spreadsheet file into the HR system", ("employee", "import")),
    ("tell me when stock of an item drops below 10", ("inventory", "alert")),
    ("anonymize meeting transcripts before sharing them outside", ("meeting", "redact")),
    ("categorize support requests by urgency", ("ticket", "classify")),
    ("how did our sales leads change compared to last month", ("lead", "compare")),
    ("validate the expense receipts employees submitted", ("expense", "validate")),
    ("predict how many incidents we'll have during the holidays", ("incident", "forecast")),
    ("enrich patient records with insurance details", ("patient", "enrich")),
    ("move old server logs to cold storage", ("log", "archive")),
    ("search news articles about electric cars", ("article", "search")),
    ("summarize what changed in the repo this week", ("commit", "summarize")),
    ("double-check the warehouse stock counts for errors", ("inventory", "validate")),
    ("audit vendor invoices for compliance", ("invoice", "audit")),
    ("translate product reviews from Japanese", ("review", "translate")),
    ("import bank transactions from a CSV file", ("transaction", "import")),
    ("dedupe job candidates who applied twice", ("candidate", "dedupe")),
    ("compare two versions of an agreement", ("contract", "compare")),
    ("send a Slack message when a shipment is delayed", ("shipment", "alert")),
    ("predict open rates for the next email campaign", ("campaign", "forecast")),
    ("hide emails and phone numbers in survey responses", ("survey", "redact")),
    ("export the list of employees in engineering to CSV", ("employee", "export")),
    ("enrich news articles with entities and locations", ("article", "enrich")),
    ("classify card transactions into spending categories", ("transaction", "classify")),
    ("check orders for wrong totals", ("order", "validate")),
    ("archive old meeting recordings", ("meeting", "archive")),
    ("merge duplicated invoices from the same supplier", ("invoice", "dedupe")),
    ("summarize what customers say in their product reviews", ("review", "summarize")),
)

"""The inspector's words in English and Chinese, and how a request picks its language:
the ``lang`` cookie the switch sets, else the browser's ``Accept-Language``."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import Request

__all__ = ["LANGUAGES", "language", "translator", "value_translator", "WORDS"]

LANGUAGES = ("en", "zh")

#: key -> (English, Chinese)
WORDS: dict[str, tuple[str, str]] = {
    "app": ("memstrata inspector", "memstrata 记忆查看器"),
    "skip": ("Skip to content", "跳到正文"),
    "login": ("Log in", "登录"),
    "logout": ("Log out", "退出"),
    "login_intro": ("Paste the key you were given (it starts with msk_) to see what is remembered "
                    "about you and to correct it. This browser stays signed in for 12 hours; the key "
                    "itself is not kept in the browser.",
                    "粘贴你拿到的密钥（以 msk_ 开头），就能查看我记得的关于你的事，并改正它。"
                    "这个浏览器会保持登录 12 小时；密钥本身不会存进浏览器。"),
    "api_key": ("Your key", "你的密钥"),
    "users": ("Users", "用户"),
    "overview": ("Overview", "概览"),
    "about": ("About me", "关于我"),
    "about_title": ("What I remember about you", "我记得的关于你的事"),
    "about_intro": ("Everything below was learned from what you said, or saved by your assistant. "
                    "Under each one: “This is right” tells me it is true, so I am surer of it; "
                    "“Correct it” lets you rewrite it; “Forget it” erases it for good.",
                    "下面每一条都来自你说过的话，或是你的助手替你记下的。每条下面：“没错”告诉我它是真的，"
                    "我会更确信它；“改正”可以把它改写对；“忘记它”会把它彻底删除。"),
    "only_you": ("Only someone signed in with your key — or the people who run this assistant — "
                 "can open this page. Keep your key to yourself.",
                 "只有用你的密钥登录的人，以及运行这个助手的人，才能打开这个页面。请不要把密钥给别人。"),
    "about_me": ("About you", "关于你"),
    "about_people": ("People in your life", "你身边的人"),
    "about_likes": ("What you like and avoid", "你的喜好与忌讳"),
    "about_asked": ("What you asked me to do", "你让我做的事"),
    "about_talked": ("What we talked about", "我们聊过什么"),
    "about_none": ("Nothing here yet.", "这里还没有内容。"),
    "told_me_on": ("You told me on {when}:", "你在{when}告诉我："),
    "said_on": ("From our conversation on {when}:", "来自{when}的对话："),
    "added_on": ("Your assistant saved this on {when}", "你的助手在{when}记下的"),
    "it_replaced": ("It replaced what I remembered before:", "它替换了我之前记得的："),
    "correct_it": ("Correct it", "改正"),
    "correct_label": ("What is right", "正确的说法"),
    "correct_hint": ("Write it as you would tell me.", "照你跟我说话的样子写。"),
    "corrected_by_you": ("corrected by the person on their page", "本人在自己的页面上改正"),
    "forget_it": ("Forget it…", "忘记它…"),
    "details": ("Details", "详情"),
    "the_conversation": ("the conversation", "这段对话"),
    "engineering_details": ("Engineering details: versions, rules, scores",
                            "技术细节：版本、规则、评分"),
    "items": ("Items", "记忆条目"),
    "search": ("Search", "检索"),
    "sessions": ("Sessions", "会话"),
    "knowledge": ("Knowledge", "知识库"),
    "operations": ("Operations", "运维"),
    "json_twin": ("JSON of this page", "本页的 JSON"),
    "rest": ("REST API", "REST 接口"),
    "language": ("Language", "语言"),
    "signed_in_as": ("Signed in with key", "当前密钥"),
    "signed_in_person": ("Signed in as {user}", "已登录：{user}"),
    "role": ("role", "角色"),
    "profile": ("Core profile", "核心画像"),
    "profile_edit": ("Edit the profile", "编辑画像"),
    "profile_history": ("Profile history", "画像历史"),
    "field": ("Field", "字段"),
    "value": ("Value", "值"),
    "save": ("Save", "保存"),
    "counts": ("What is remembered", "记住了什么"),
    "by_kind": ("By kind", "按类型"),
    "by_status": ("By status", "按状态"),
    "timeline": ("Timeline of changes", "变更时间线"),
    "open_todos": ("Open todos", "未完成事项"),
    "none": ("Nothing yet.", "暂无。"),
    "kind": ("Kind", "类型"),
    "status": ("Status", "状态"),
    "layer": ("Layer", "层"),
    "tag": ("Tag", "标签"),
    "text": ("Text", "文本"),
    "filter": ("Filter", "筛选"),
    "any": ("any", "全部"),
    "content": ("Content", "内容"),
    "confidence": ("Confidence", "置信度"),
    "importance": ("Importance", "重要性"),
    "version": ("Version", "版本"),
    "updated": ("Updated", "更新于"),
    "history": ("Version history", "版本历史"),
    "who": ("Who", "谁"),
    "when": ("When", "何时"),
    "why": ("Why", "原因"),
    "change": ("Change", "改动"),
    "source_turns": ("Source turns", "来源对话"),
    "edit": ("Correct this memory", "更正这条记忆"),
    "reason": ("Reason", "原因"),
    "undo": ("Undo the last change", "撤销上一次改动"),
    "thumbs_up": ("This is right", "没错"),
    "thumbs_up_hint": ("Tells me this is true, so I am surer of it", "告诉我这是真的，我会更确信它"),
    "thumbs_down": ("This is wrong", "不对"),
    "mark_done": ("Mark done", "标记完成"),
    "forget": ("Forget…", "忘记…"),
    "forget_now": ("Forget for good", "永久忘记"),
    "cancel": ("Cancel", "取消"),
    "forget_title": ("This will be erased", "以下内容将被永久删除"),
    "forget_intro": ("Once forgotten, nothing of it can be brought back: what is listed below, every "
                     "earlier version of it and every copy kept for searching are erased.",
                     "忘记后无法恢复：下面列出的内容、它们以前的所有版本，以及为检索保存的所有副本都会被删除。"),
    "also_turns": ("Also the conversation turns it came from", "同时删除它来源的对话"),
    "also_items": ("Also the memories extracted from these turns", "同时删除从这些对话中提取的记忆"),
    "erase_items": ("Memory items", "记忆条目"),
    "erase_versions": ("version(s)", "个版本"),
    "erase_turns": ("Conversation turns", "对话消息"),
    "erase_shrunk": ("Kept: other sessions say it too (only those remain its source)",
                     "保留：其他会话也说过（来源只剩那些会话）"),
    "erase_summaries": ("Session summaries (cleared, then rebuilt from the turns that remain)",
                        "会话摘要（清空后用剩余对话重建）"),
    "kept_note": ("Kept", "保留"),
    "forgotten_ok": ("Forgotten.", "已忘记。"),
    "saved_ok": ("Saved.", "已保存。"),
    "undone_ok": ("Undone.", "已撤销。"),
    "feedback_ok": ("Thanks — the confidence changed.", "谢谢，置信度已调整。"),
    "confirmed_ok": ("Thanks — I am surer of it now.", "谢谢，我现在更确信这一条了。"),
    "done_ok": ("Marked done.", "已标记完成。"),
    "query": ("Query", "查询"),
    "run": ("Run", "运行"),
    "budget": ("Token budget", "Token 预算"),
    "hits": ("Hits", "命中"),
    "score": ("Score", "得分"),
    "score_parts": ("Score parts", "得分构成"),
    "in_context": ("In the context?", "进入上下文？"),
    "lexical_candidates": ("Lexical candidates (BM25)", "词法候选（BM25）"),
    "dense_candidates": ("Dense candidates (vectors)", "向量候选"),
    "query_tokens": ("Analysed query", "分析后的查询"),
    "assembled": ("The assembled context()", "组装好的 context()"),
    "token_report": ("Tokens per layer", "各层 token"),
    "quota": ("Quota", "配额"),
    "tokens": ("Tokens", "Token 数"),
    "dropped": ("Left out", "被舍弃"),
    "recall_mode": ("Recall", "召回模式"),
    "why_kept": ("enters the context", "进入上下文"),
    "why_not_recalled": ("not recalled (light recall: profile only)", "未召回（轻量模式只用画像）"),
    "why_below_k": ("not among the lines the context recalled", "不在上下文召回的条目中"),
    "messages": ("Messages", "消息"),
    "summary": ("Summary", "摘要"),
    "summary_range": ("covers messages", "覆盖消息"),
    "summary_history": ("Summary versions v1…vN", "摘要版本 v1…vN"),
    "summary_folded": ("folded in messages", "本步纳入消息"),
    "archive_state": ("State", "状态"),
    "archive": ("Archive now", "立即归档"),
    "forget_turns": ("Forget this session's turns…", "忘记本会话的对话…"),
    "tool_call": ("tool call", "工具调用"),
    "tool_result": ("tool result", "工具结果"),
    "jobs": ("Jobs", "后台任务"),
    "llm_usage": ("LLM usage", "LLM 用量"),
    "calls": ("Calls", "调用次数"),
    "latency": ("Mean latency (s)", "平均延迟（秒）"),
    "audit": ("Audit log", "审计日志"),
    "action": ("Action", "操作"),
    "key": ("Key", "密钥"),
    "documents": ("Documents", "文档"),
    "chunks": ("Chunks", "分块"),
    "recalled": ("Recalled", "被召回"),
    "used": ("Used", "被使用"),
    "stale": ("Recalled often, never used", "常被召回但从未使用"),
    "private": ("private", "私有"),
    "error": ("Something went wrong", "出错了"),
    "back": ("Back", "返回"),
    "prev": ("Previous", "上一页"),
    "next": ("Next", "下一页"),
    "op_extracted": ("extracted", "提取"),
    "op_remembered": ("remembered", "记住"),
    "op_boosted": ("boosted", "强化"),
    "op_superseded": ("superseded", "被取代"),
    "op_corrected": ("corrected", "更正"),
    "op_feedback": ("feedback", "反馈"),
    "op_status": ("status changed", "状态变更"),
    "op_deleted": ("deleted", "删除"),
    "op_forgotten": ("forgotten", "被忘记"),
    "op_undone": ("undone", "撤销"),
    "op_profile": ("profile edited", "画像编辑"),
    "pages_nav": ("Pages", "翻页"),
    "k_hits": ("Hits (k)", "条数 (k)"),
    "people": ("People", "身边的人"),
    "slot": ("Subject · attribute · value", "主体 · 属性 · 值"),
    "id": ("Id", "编号"),
    "title": ("Title", "标题"),
    "source": ("Source", "来源"),
    "format": ("Format", "格式"),
    "last_reviewed": ("Last reviewed", "上次审阅"),
    "heading": ("Heading", "章节"),
    "purpose": ("Purpose", "用途"),
    "failures": ("Failures", "失败次数"),
    "count": ("Count", "次数"),
    "user": ("User", "用户"),
    "attempts": ("Attempts", "尝试次数"),
    "error_or_result": ("Error / result", "错误 / 结果"),
    "target": ("Target", "对象"),
    "writes": ("Writes", "写入次数"),
    # values shown on the pages, by group (v('kind', item.kind)); a value not listed shows as is
    "kind.fact": ("fact", "事实"),
    "kind.preference": ("preference", "偏好"),
    "kind.instruction": ("instruction", "要求"),
    "kind.todo": ("todo", "待办"),
    "kind.event": ("event", "经历"),
    "status.active": ("active", "有效"),
    "status.superseded": ("superseded", "已被取代"),
    "status.inactive": ("inactive", "已淡出"),
    "status.done": ("done", "已完成"),
    "status.all": ("all", "全部"),
    "layer.semantic": ("semantic", "记忆条目"),
    "layer.episodic": ("episodic", "对话原文"),
    "layer.knowledge": ("knowledge", "知识库"),
    "role.user": ("user", "用户"),
    "role.assistant": ("assistant", "助手"),
    "role.tool": ("tool", "工具"),
    "role.system": ("system", "系统"),
    "session.open": ("open", "进行中"),
    "session.closed": ("closed", "已结束"),
    "session.archived": ("archived", "已归档"),
    "recall.auto": ("auto", "自动"),
    "recall.light": ("light", "轻量"),
    "recall.deep": ("deep", "深入"),
    "field.name": ("Name", "姓名"),
    "field.role": ("Role", "角色"),
    "field.language": ("Language", "语言"),
    "field.goals": ("Goals", "目标"),
    "field.current": ("Working on now", "正在做的事"),
    "field.preferences": ("Preferences", "偏好"),
    "itemfield.content": ("content", "内容"),
    "itemfield.kind": ("kind", "类型"),
    "itemfield.status": ("status", "状态"),
    "itemfield.subject": ("subject", "主体"),
    "itemfield.attribute": ("attribute", "属性"),
    "itemfield.value": ("value", "值"),
    "itemfield.confidence": ("confidence", "置信度"),
    "itemfield.importance": ("importance", "重要性"),
    "itemfield.tags": ("tags", "标签"),
    "itemfield.supersedes": ("supersedes", "取代了"),
    "ctx.system": ("system", "系统提示"),
    "ctx.profile": ("profile", "画像"),
    "ctx.summary": ("summary", "会话摘要"),
    "ctx.memories": ("memories", "记忆"),
    "ctx.knowledge": ("knowledge", "知识库"),
    "ctx.recent": ("recent", "最近的对话"),
    "job.pending": ("pending", "排队中"),
    "job.running": ("running", "运行中"),
    "job.done": ("done", "已完成"),
    "job.failed": ("failed", "失败"),
    "jobkind.extract": ("extract", "提取记忆"),
    "jobkind.maintain": ("maintain", "维护"),
    "jobkind.profile": ("profile", "更新画像"),
    "jobkind.summarise": ("summarise", "会话摘要"),
    "jobkind.consolidate": ("consolidate", "整合"),
    "keyrole.admin": ("admin", "管理员"),
    "keyrole.app": ("app", "应用"),
    "keyrole.read-only": ("read-only", "只读"),
    "keyrole.end-user": ("end user", "本人"),
    "summary.goal": ("Goal", "目标"),
    "summary.decisions": ("Decisions", "决定"),
    "summary.done": ("Done", "已完成"),
    "summary.open_questions": ("Open questions", "待解决的问题"),
    "summary.constraints": ("Constraints", "约束"),
}


def language(request: Request) -> str:
    """``zh`` or ``en``: the switch's cookie, else the first supported language the
    browser's ``Accept-Language`` asks for (by q-value), else English."""
    chosen = request.cookies.get("lang")
    if chosen in LANGUAGES:
        return chosen
    ranked: list[tuple[float, int, str]] = []
    for i, part in enumerate(request.headers.get("accept-language", "").split(",")):
        tag, _, params = part.strip().partition(";")
        q = 1.0
        if params.strip().startswith("q="):
            try:
                q = float(params.strip()[2:])
            except ValueError:
                q = 0.0
        base = tag.strip().lower().split("-")[0]
        if base in LANGUAGES and q > 0:
            ranked.append((-q, i, base))
    return min(ranked)[2] if ranked else "en"


def translator(lang: str) -> Callable[[str], str]:
    """``t(key)``: the word in ``lang`` (the key itself when there is none, so a missing
    word shows, not an empty label)."""
    index = LANGUAGES.index(lang)
    return lambda key: WORDS[key][index] if key in WORDS else key


def value_translator(lang: str) -> Callable[[str, object], str]:
    """``v(group, value)``: a value from a fixed vocabulary (an item's kind or status, a
    layer, a role, a profile field…) in ``lang``; any other value — stored text, an id —
    as it is."""
    index = LANGUAGES.index(lang)

    def v(group: str, value: object) -> str:
        word = WORDS.get(f"{group}.{value}")
        return word[index] if word else "" if value is None else str(value)
    return v

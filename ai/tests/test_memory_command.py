"""The aimemory command on real long-term memory (Mem0 with its local FAISS and embedder):
its overview, /search, /show and /profiles, private items marked, errors, 78 columns."""

import re

from django.test import override_settings
from evennia.objects.objects import DefaultCharacter
from evennia.utils.ansi import strip_ansi
from evennia.utils.create import create_object

from ai.commands import AssistantCmdSet, CmdAiMemory
from ai.helpers.entity_context import add_observation, run_entity_consolidation_batch
from ai.helpers.journal import add_entry
from ai.helpers.memory_links import links_for
from ai.models import JournalEntry, MemoryLink
from ai.sleep import run_sleep_tick
from ai.sleep.compaction import compact_conversation_history
from ai.sleep.consolidation import consolidate_memories_to_semantic
from ai.sleep.record import SAVE_EVERY_TICKS, record_dream_tick, sleep_record

from .support import (
    AssistantCommandTestCase,
    make_assistant,
    record_messages,
    store_window,
    wait_for,
)

OLD, NEW = "The gate password is swordfish.", "The gate password is now marmalade."
FORGE = 'Char says, "Bob runs the forge by the northern bridge."'
FACTS = [
    'Char says, "My sister Elena works as a blacksmith in Riverdale village."',
    'Char says, "Captain Harlow keeps the harbour keys inside his blue coat."',
    'Char says, "The library closes early every Thursday for cleaning."',
]


class MemoryCommandTestCase(AssistantCommandTestCase):
    def setUp(self):
        super().setUp()
        # What the command sends later, when a search's Deferred fires.
        self.heard = record_messages(self.char1)

    def journal(self, text, audience=None, source_message_ids=()):
        return add_entry(
            self.assistant,
            text,
            "conversation",
            audience=audience,
            source_message_ids=source_message_ids,
        )

    def consolidate(self):
        return wait_for(consolidate_memories_to_semantic(self.script, self.assistant, 20))

    def link(self, text):
        return MemoryLink.objects.get(text=text)

    def aimemory(self, args, expected=None):
        """Run aimemory; return what it sent at once, checked to fit 78 columns."""
        output = self.call(CmdAiMemory(), args, expected)
        self.assert_fits(output)
        return output

    def search(self, words):
        """Run aimemory/search and wait for Mem0; return what it sent when it answered."""
        self.aimemory(
            f"/search Helper = {words}",
            f"Searching the long-term memory of Helper for {words!r}...",
        )
        before = len(self.heard)
        wait_for(self.char1.ndb.aimemory_search)
        output = strip_ansi("\n".join(map(str, self.heard[before:])))
        self.assert_fits(output)
        return output

    def supersede(self):
        """Remember the gate password, then its change; return (old link, new link)."""
        self.journal(OLD)
        self.consolidate()
        self.journal(NEW)
        self.consolidate()
        return self.link(OLD), self.link(NEW)

    def assert_fits(self, output, width=78):
        self.assertEqual([line for line in output.splitlines() if len(line) > width], [])


class TestOverview(MemoryCommandTestCase):
    def test_counts_before_anything_was_remembered(self):
        output = self.aimemory("Helper")
        self.assertIn("Memories: 0 (0 current, 0 superseded).", output)
        self.assertIn(
            "Journal: 0 entries, 0 consolidated into memory, 0 waiting for the next sleep; "
            "0 archived.",
            " ".join(output.split()),
        )
        self.assertIn("Entity profiles: 0 (0 observations, 0 superseded).", output)
        self.assertIn("Last sleep: never.", output)

    def dream(self):
        """Run one tick of the assistant asleep (it dreams once it has dozed)."""
        return wait_for(self.script.run_tick())

    def test_counts_memories_entries_profiles_and_tells_what_the_whole_sleep_did(self):
        self.journal(OLD)
        self.script.fall_asleep("test")
        self.assertEqual(self.dream()["phase"], "dozing")
        self.dream()
        self.journal(NEW)
        add_observation(self.assistant, self.char1, "I live in Oakvale.")
        add_observation(self.assistant, self.char1, "I moved to Rivertown.")
        add_observation(self.assistant, self.char2, "I sell bread.")
        self.dream()
        self.dream()  # nothing is left to do: the sleep's record still tells what it did
        self.journal("Bob sells bread at dawn.")
        JournalEntry.objects.filter(content=OLD).update(archived=True)
        self.script.set_config("memory_enabled", False)
        output = self.aimemory("Helper")
        shown = " ".join(output.split())
        self.assertIn(
            "Memories: 2 (1 current, 1 superseded); memory_enabled is False: no new ones are "
            "made.",
            shown,
        )
        self.assertIn(
            "Journal: 3 entries, 2 consolidated into memory, 1 waiting for the next sleep; "
            "1 archived.",
            shown,
        )
        self.assertIn("Entity profiles: 2 (3 observations, 1 superseded).", shown)
        record = sleep_record(self.script)
        began, at = record["began"], record["at"]
        self.assertIn(
            f"Last sleep: began {began[:10]} {began[11:19]}, 3 dreaming ticks, the last at "
            f"{at[:10]} {at[11:19]}; asleep now. What it did:",
            shown,
        )
        self.assertIn(
            "memory_consolidation: 2 entries consolidated, 2 memories added, 1 memory "
            "superseded, 0 entries still waiting",
            shown,
        )
        self.assertIn(
            "entity_consolidation: 3 observations consolidated into profiles, 1 superseded, "
            "0 repeats merged",
            shown,
        )
        self.assertRegex(output, r"\n    context_compaction: skipped: ")
        steps = re.findall(r"^    (\w+):", output, re.M)
        self.assertEqual(steps, list(record["steps"]))

    def test_a_new_sleep_starts_a_new_record_and_a_failing_step_is_counted(self):
        self.journal(OLD)
        self.script.fall_asleep("test")
        self.dream(), self.dream()
        self.script.wake_up("test")
        self.script.fall_asleep("test")
        self.dream()
        broken = {"vector_store": {"provider": "no-such-store"}}
        self.journal(NEW)
        with override_settings(AI_MEMORY_CONFIG=broken):
            self.dream()
        self.script.wake_up("test")
        shown = " ".join(self.aimemory("Helper").split())
        self.assertIn(", 1 dreaming tick, the last at", shown)
        self.assertNotIn("asleep now", shown)
        self.assertRegex(
            shown,
            r"memory_consolidation: 0 entries consolidated, 0 memories added, 0 memories "
            r"superseded; failed in 1 tick: .*no-such-store",
        )

    def forget_what_is_held(self):
        """Lose the script's memory (``ndb``), as a new server process would."""
        self.script.ndb.sleep_record = None

    def test_the_record_is_saved_at_a_reload_and_a_wake_and_a_crash_loses_only_counts(self):
        self.journal(OLD)
        self.script.fall_asleep("test")
        for _ in range(4):  # dozing, then three dreaming ticks
            self.dream()
        self.script.at_server_reload()
        self.forget_what_is_held()
        self.assertIn(", 3 dreaming ticks, the last at", " ".join(self.aimemory("Helper").split()))
        self.dream()
        self.script.wake_up("test")
        # A dreaming tick that was waiting on the memory worker ends after the wake.
        record_dream_tick(self.script, {"episodic_prune": {"archived": 2}})
        self.forget_what_is_held()
        shown = " ".join(self.aimemory("Helper").split())
        self.assertIn(", 5 dreaming ticks, the last at", shown)
        self.assertNotIn("asleep now", shown)
        self.assertIn("memory_consolidation: 1 entry consolidated, 1 memory added", shown)
        self.assertIn("episodic_prune: 2 entries archived", shown)
        # A crash (no hook runs) loses the counts held since the last save, not what the
        # ticks did: until the 30th tick the record saved is the sleep before, which is
        # not said to be under way.
        self.script.fall_asleep("test")
        self.journal(NEW)
        for _ in range(3):  # dozing, then two dreaming ticks
            self.dream()
        held = sleep_record(self.script)
        self.forget_what_is_held()
        shown = " ".join(self.aimemory("Helper").split())
        self.assertIn(", 5 dreaming ticks, the last at", shown)
        self.assertNotIn("asleep now", shown)
        self.assertIn("Memories: 2 (1 current, 1 superseded)", shown)
        self.script.ndb.sleep_record = dict(held, ticks=SAVE_EVERY_TICKS - 1)
        self.dream()
        self.forget_what_is_held()
        shown = " ".join(self.aimemory("Helper").split())
        self.assertIn(f", {SAVE_EVERY_TICKS} dreaming ticks, the last at", shown)


class TestSearch(MemoryCommandTestCase):
    def test_finds_a_memory_and_marks_the_superseded_one(self):
        old, new = self.supersede()
        output = self.search("gate password")
        self.assertIn(
            "Memories of Helper nearest 'gate password', best first (aimemory/show Helper = "
            "<link> shows one in full):",
            " ".join(output.split()),
        )
        self.assertRegex(output, r"\n link +score +superseded +by +memory")
        self.assertRegex(output, rf"\n {new.id} +\d\.\d\d +- +- +{re.escape(NEW)}")
        since = re.escape(f"{old.invalid_at.isoformat()[:10]} {old.invalid_at.isoformat()[11:19]}")
        self.assertRegex(output, rf"\n {old.id} +\d\.\d\d +{since} +{new.id} +{re.escape(OLD)}")

    def test_shows_a_private_memory_marked(self):
        self.journal("Char's locker code is 4471.", audience=[self.char1.dbref])
        self.consolidate()
        output = self.search("locker code")
        link = self.link("Char's locker code is 4471.")
        self.assertRegex(
            output,
            rf"\n {link.id} +\d\.\d\d .*\(private to Char \({self.char1.dbref}\)\) Char's locker",
        )

    def test_cuts_a_long_memory_to_one_line(self):
        long = "The harbour master keeps " + "a very long ledger of ships " * 10 + "."
        self.journal(long)
        self.consolidate()
        output = self.search("harbour ledger")
        row = next(line for line in output.splitlines() if "harbour master" in line)
        self.assertTrue(row.rstrip().endswith("…"), row)

    def test_says_when_nothing_is_remembered(self):
        self.assertIn(
            "Helper remembers nothing near 'gate password'.", self.search("gate password")
        )

    def test_tells_the_caller_what_failed(self):
        with override_settings(AI_MEMORY_CONFIG={"vector_store": {"provider": "no-such-store"}}):
            output = self.search("gate password")
        self.assertRegex(
            " ".join(output.split()), r"^Helper: the memory search failed: .*no-such-store"
        )


class TestShow(MemoryCommandTestCase):
    def test_shows_a_memory_with_its_entry_and_the_messages_it_came_from(self):
        said = self.script.append_message({"role": "user", "content": FORGE})
        for fact in FACTS:
            self.script.append_message({"role": "assistant", "content": "Noted, thank you."})
            self.script.append_message({"role": "user", "content": fact})
        self.script.set_config("compact_preserve_window", 2)
        store_window(self.script, 1000)
        compaction = wait_for(
            compact_conversation_history(self.script, self.assistant, force=True, kind="manual")
        )
        self.assertTrue(compaction["success"], compaction)
        live = self.script.append_message(
            {"role": "user", "content": 'Char says, "Bob still runs it."\nAnd more.'}
        )
        self.journal("Bob runs the forge.", source_message_ids=[said["id"], live["id"], 99999])
        self.consolidate()
        link = self.link("Bob runs the forge.")
        entry = link.entry
        output = self.aimemory(f"/show Helper = {link.id}")
        self.assertTrue(
            output.startswith(
                f"Memory link {link.id} of Helper (Mem0 id {link.memory_id}):\n"
                "    Bob runs the forge.\n"
                f"Valid from: {link.valid_from.isoformat()[:10]} "
            ),
            output,
        )
        self.assertIn("Superseded: no, it holds.\nAudience: public.", output)
        self.assertIn(
            f"Source entry: {entry.entry_id} (conversation, importance 5, score "
            f"{JournalEntry.objects.get(id=entry.id).score:g}, not archived).",
            " ".join(output.split()),
        )
        self.assertRegex(output, r"History messages it came from:\n row id +position +role +state")
        self.assertRegex(
            output,
            rf"\n {said['id']} +{said['position']} +user +archived in "
            rf"{compaction['summary_id']} +Char says, \"Bob runs the forge",
        )
        self.assertRegex(
            output,
            rf"(?m)^ {live['id']} +{live['position']} +user +live +Char says, \"Bob still runs "
            r"it\.\" *$",
        )
        self.assertNotIn("And more.", output, "only the first line")
        self.assertIn("No longer stored: 99999.", output)

    def test_shows_what_superseded_a_memory_and_what_it_superseded(self):
        old, new = self.supersede()
        output = self.aimemory(f"/show Helper = {old.id}")
        since = f"{old.invalid_at.isoformat()[:10]} {old.invalid_at.isoformat()[11:19]}"
        # Wrapped at 78 columns, where the ids' lengths fall (long on PostgreSQL, whose ids
        # are not reused after a test's rollback).
        self.assertIn(f"Superseded: {since} by link {new.id}: {NEW}", " ".join(output.split()))
        self.assertIn("History messages it came from: none recorded.", output)
        output = self.aimemory(f"/show Helper = {new.id}")
        self.assertIn(f"Superseded: no, it holds.\nSupersedes: link {old.id}.", output)

    def test_a_listener_since_deleted_is_said_so_never_a_bare_dbref(self):
        gone = create_object(DefaultCharacter, key="Passerby", location=self.room1)
        ref = gone.dbref
        self.journal("The passerby's locker code is 9182.", audience=[ref])
        self.consolidate()
        gone.delete()
        link = self.link("The passerby's locker code is 9182.")
        self.assertIn(
            f"Audience: private to someone since deleted ({ref}).",
            " ".join(self.aimemory(f"/show Helper = {link.id}").split()),
        )

    def test_marks_a_private_memory_and_a_deleted_entry(self):
        self.journal("Char's locker code is 4471.", audience=[self.char1.dbref])
        self.consolidate()
        link = self.link("Char's locker code is 4471.")
        self.assertIn(
            f"Audience: private to Char ({self.char1.dbref}).",
            self.aimemory(f"/show Helper = {link.id}"),
        )
        JournalEntry.objects.filter(id=link.entry_id).delete()  # a builder withdrew it
        self.assertIn(
            "Source entry: deleted from the journal (the next sleep drops this memory).",
            " ".join(self.aimemory(f"/show Helper = {link.id}").split()),
        )

    def test_shows_a_long_memory_whole_within_78_columns(self):
        long = "The harbour master keeps " + "a very long ledger of ships " * 10 + "."
        self.journal(long)
        self.consolidate()
        output = self.aimemory(f"/show Helper = {self.link(long).id}")
        self.assertIn(" ".join(long.split()), " ".join(output.split()))


class TestProfiles(MemoryCommandTestCase):
    def test_shows_current_observations_and_superseded_ones_indented_below(self):
        add_observation(self.assistant, self.char1, "I live in Oakvale.")
        add_observation(self.assistant, self.char1, "I moved to Rivertown.")
        add_observation(
            self.assistant, self.char1, "My vault code is 4417.", audience=[self.char1.dbref]
        )
        add_observation(self.assistant, self.char2, "I sell bread.")
        run_entity_consolidation_batch(self.script, self.assistant, 20)
        output = self.aimemory("/profiles Helper")
        old = self.assistant.ai_observations.get(text="I live in Oakvale.").invalid_at.isoformat()
        char = self.char1.dbref
        self.assertRegex(
            output,
            rf"Char \({char}\): 2 current, 1 superseded, updated [\d-]+ [\d:]+\n"
            rf"    I moved to Rivertown\.\n"
            rf"    \(private to Char \({char}\)\) My vault code is 4417\.\n"
            rf"        \(superseded {old[:10]} {old[11:19]} by: I moved to Rivertown\.\) "
            r"I live in\s+Oakvale\.",
        )
        self.assertIn(f"Char2 ({self.char2.dbref}): 1 current, 0 superseded", output)
        only = self.aimemory("/profiles Helper = char2")
        self.assertIn("Entity profiles of Helper (1;", only)
        self.assertNotIn("Oakvale", only)
        self.assertIn("I sell bread.", self.aimemory(f"/profiles Helper = {self.char2.dbref}"))
        self.aimemory("/profiles Helper = Dana", "Helper has no entity profile of 'Dana'.")

    def test_says_when_there_are_none(self):
        self.aimemory("/profiles Helper", "Helper has no entity profiles.")

    def test_long_output_is_paged(self):
        for number in range(40):
            add_observation(self.assistant, self.char1, f"I own {number} goats in the hills.")
        output = self.aimemory("/profiles Helper")
        self.assertRegex(output, r"Page \[1/\d\]")
        self.assertIsNotNone(self.char1.ndb._more)


class TestErrors(MemoryCommandTestCase):
    def test_each_mistake_is_named_in_one_line(self):
        self.aimemory(
            "Nobody", f"No assistant is called 'Nobody'; here: Helper ({self.assistant.dbref})"
        )
        self.aimemory("/search Nobody = gate", "No assistant is called 'Nobody'; here: Helper")
        self.aimemory("/search Helper", "Usage: aimemory/search [<assistant>] = <words>")
        self.aimemory("/show Helper =", "Usage: aimemory/show [<assistant>] = <link id>")
        self.aimemory("Helper = gate", "Usage: aimemory [<assistant>]")
        self.aimemory(
            "/show Helper = twelve", "'twelve' is not a link id: give the number /search shows."
        )
        self.aimemory("/show Helper = 9999", "Helper has no memory link 9999.")
        long = "nine" * 30  # the answer is wrapped within 78 columns (aimemory checks)
        output = self.aimemory(f"/show Helper = {long}")
        self.assertTrue(output.startswith("'ninenine"), output)
        self.assertIn(
            "' is not a link id: give the number /search shows.", " ".join(output.split())
        )

    def test_an_unknown_switch_is_refused_and_nothing_is_searched(self):
        for args, refusal in (
            (
                "/serch Helper = gate",
                "aimemory has no switch /serch. Its switches: /search, /show, /profiles.",
            ),
            (
                "Helper/serch gate",
                "aimemory has no switch /serch. Its switches: /search, /show, /profiles.",
            ),
            ("/s Helper = gate", "aimemory: /s could be /search or /show; type more of it."),
            ("/search/show Helper = 1", "aimemory takes one switch at a time, not /search/show."),
        ):
            with self.subTest(args):
                self.assertEqual(" ".join(self.aimemory(args).split()), refusal)
        self.assertIsNone(self.char1.ndb.aimemory_search)

    def test_the_old_spelling_still_works_and_says_the_new_one(self):
        self.assertEqual(
            self.aimemory("Helper/profiles").splitlines(),
            [
                "(Deprecated spelling: write aimemory/profiles Helper.)",
                "Helper has no entity profiles.",
            ],
        )
        self.assertEqual(
            self.aimemory("Helper/show 9999").splitlines(),
            [
                "(Deprecated spelling: write aimemory/show Helper = 9999.)",
                "Helper has no memory link 9999.",
            ],
        )

    def test_a_link_of_another_assistant_is_not_found(self):
        other = make_assistant("Sage", self.room2)
        add_entry(other, "The sage hides the key under the bell.", "conversation")
        links, _ = links_for(other, list(JournalEntry.objects.filter(db_object_id=other.id)))
        link = next(iter(links.values()))
        self.aimemory(f"/show Helper = {link.id}", f"Helper has no memory link {link.id}.")

    def test_without_a_name_the_only_assistant_here_is_shown(self):
        self.aimemory("", "Long-term memory of Helper")
        self.aimemory("/profiles", "Helper has no entity profiles.")
        self.aimemory("/profiles = Dana", "Helper has no entity profile of 'Dana'.")
        self.aimemory("/search = gate", "Searching the long-term memory of Helper for 'gate'...")
        wait_for(self.char1.ndb.aimemory_search)
        self.assertIn("Helper remembers nothing near 'gate'.", strip_ansi(str(self.heard[-1])))

    def test_locked_to_builders_and_in_the_command_set(self):
        self.assertTrue(CmdAiMemory().access(self.char1, "cmd"))
        self.assertFalse(CmdAiMemory().access(self.char2, "cmd"))
        cmdset = AssistantCmdSet()
        cmdset.at_cmdset_creation()
        self.assertIn("aimemory", [command.key for command in cmdset.commands])
        for heading in ("Usage:", "Switches:", "Examples:"):
            self.assertIn(heading, CmdAiMemory.__doc__)

"""Play a scripted conversation with an AI assistant in a throwaway Evennia game.

Three players talk in a tavern; the assistant hears them through its real typeclass
and answers on each tick, using the offline engine (no network, no API key). After
every tick the driver prints the line, the reply and how full the assistant's context is.

Usage (``make demo`` builds the game directory and runs this)::

    python demo/play.py [GAME_DIR]

``GAME_DIR`` defaults to ``build/demo_game`` beside this repository's ``demo/`` folder;
it must be an initialised Evennia game with ``"ai"`` in ``INSTALLED_APPS`` (this script
migrates it).
"""

import os
import sys
import time

from twisted.internet import defer, reactor

ROOM = "Tavern"
ASSISTANT = "Helper"
PLAYERS = ("Alice", "Bob", "Carol")
ASSISTANT_TYPECLASS = "ai.assistant_character.AssistantCharacter"
ROOM_TYPECLASS = "typeclasses.rooms.Room"
PLAYER_TYPECLASS = "typeclasses.characters.Character"
DEFAULT_GAME_DIR = os.path.join(os.path.dirname(os.path.dirname(__file__)), "build", "demo_game")
RULE = "-" * 78

# (speaker, line): facts are planted first, questions about them come later.
SCENARIO = [
    ("Alice", "Hello Helper, good evening!"),
    ("Bob", "My name is Bob and I run the forge by the north gate."),
    ("Carol", "I buried 40 gold coins under the old oak in Mirkwood."),
    ("Alice", "I promised Bob to deliver 12 iron ingots on Friday."),
    ("Bob", "The password for the cellar door is swordfish."),
    ("Carol", "My horse is called Thunder and she is seven years old."),
    ("Alice", "Where did Carol bury the gold coins?"),
    ("Carol", "What is the password for the cellar door?"),
    ("Bob", "How many iron ingots will Alice deliver to me?"),
    ("Alice", "What is the horse of Carol called?"),
    ("Bob", "Where is my forge?"),
    ("Carol", "Who will win the archery tournament?"),
]


def boot_evennia(game_dir):
    """Load the game's settings and Django, migrate its database, then initialise Evennia.

    Args:
        game_dir (str): The Evennia game directory (holding ``server/conf/settings.py``).
    """
    game_dir = os.path.abspath(game_dir)
    os.chdir(game_dir)
    sys.path.insert(0, game_dir)
    os.environ["DJANGO_SETTINGS_MODULE"] = "server.conf.settings"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)
    import evennia

    evennia._init()


def remove_previous_cast():
    """Delete the objects a previous run left behind, so every run starts afresh."""
    from evennia.utils.search import search_object

    for key in (ASSISTANT, *PLAYERS, ROOM):
        for obj in search_object(key, exact=True):
            obj.delete()


def build_cast():
    """Create the tavern, its three players and the assistant.

    Returns:
        tuple: ``(players, assistant)``: players by name, and the AssistantCharacter.
    """
    from evennia.utils import create

    room = create.create_object(ROOM_TYPECLASS, key=ROOM, nohome=True)
    players = {
        name: create.create_object(PLAYER_TYPECLASS, key=name, location=room, home=room)
        for name in PLAYERS
    }
    assistant = create.create_object(ASSISTANT_TYPECLASS, key=ASSISTANT, location=room, home=room)
    # The driver plays the ticker: stop the script's own timer so only our ticks run.
    assistant.assistant_script.stop()
    return players, assistant


def print_header(script):
    """Print what is being run, with which model, and the context limit."""
    from ai.llm_interaction import resolve_model

    usage = script.context_usage()
    print(RULE)
    print(f"evennia-ai demo: {ASSISTANT} in the {ROOM} with {', '.join(PLAYERS)}")
    print(f"model: {resolve_model(script)} (in-process offline engine: no network, no API key)")
    print(f"context limit: {usage.max_tokens:,} tokens; {len(SCENARIO)} lines, one tick each")
    print(RULE)


def reply_of(result):
    """Return what the assistant said in a tick, or a description of why it said nothing."""
    if result.get("status") == "replied":
        return result["reply"]
    return f"(no reply: {result.get('status')} {result.get('error', '')})".rstrip()


def print_tick(number, speaker, line, result, usage):
    """Print one tick: the player's line, the reply, and the context usage."""
    print(f"[{number:2d}] {speaker}: {line}")
    print(f"     {ASSISTANT}: {reply_of(result)}")
    print(
        f"     context: {usage.total_tokens:,} tokens (history {usage.history_tokens:,}, "
        f"{usage.message_count} messages) of {usage.max_tokens:,} = {usage.usage:.2%}"
    )


@defer.inlineCallbacks
def play(players, assistant):
    """Play the scenario: one spoken line, then one tick, per entry.

    Returns:
        Deferred: Fires with the number of ticks that did not reply.
    """
    script = assistant.assistant_script
    print_header(script)
    failures = 0
    for number, (speaker, line) in enumerate(SCENARIO, start=1):
        players[speaker].execute_cmd(f"say {line}")
        result = yield script.at_repeat()
        if result.get("status") != "replied":
            failures += 1
        print_tick(number, speaker, line, result, script.context_usage())
    return failures


def report(failures):
    """Return the exit code for a finished scenario, telling stderr about silent ticks."""
    if failures:
        print(f"{failures} tick(s) did not reply", file=sys.stderr)
        return 1
    return 0


def report_crash(failure):
    """Print the traceback of a scenario that raised and return a failing exit code."""
    failure.printTraceback(file=sys.stderr)
    return 1


def run_in_reactor(players, assistant):
    """Run the scenario inside Twisted's real reactor and return the process exit code."""
    exit_codes = []

    def start():
        playing = play(players, assistant).addCallbacks(report, report_crash)
        playing.addCallback(exit_codes.append)
        playing.addBoth(lambda _: reactor.stop())

    reactor.callWhenRunning(start)
    reactor.run()
    return exit_codes[0] if exit_codes else 1


def main(argv):
    """Boot the game, (re)build the cast, play the scenario; return the exit code."""
    from ai.utils.network_guard import forbid_network

    started = time.monotonic()
    forbid_network()
    boot_evennia(argv[1] if len(argv) > 1 else DEFAULT_GAME_DIR)
    remove_previous_cast()
    code = run_in_reactor(*build_cast())
    print(RULE)
    print(f"done in {time.monotonic() - started:.1f}s")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""Reading sub-goals out of a model's reply, in every shape a small model writes them."""

from unittest import TestCase

from ai.utils.goal_lists import sub_goal_items, usable_sub_goals

STEPS = ["Find the <thing>", "Ask <name> about it", "Bring it back"]


class TestShapes(TestCase):
    def test_numbered_lines_after_a_lead_in_with_details_under_them(self):
        reply = (
            "Here is a plan:\n1. Find the <thing>\n   - look in <place>\n2) Ask <name> about it"
            "\n3. **Bring** it back\nGood luck!"
        )
        self.assertEqual(sub_goal_items(reply), STEPS)

    def test_bullets_keep_the_outer_level(self):
        reply = "- Find the <thing>\n  * under <place>\n- Ask <name> about it\n- Bring it back"
        self.assertEqual(sub_goal_items(reply), STEPS)

    def test_step_labels(self):
        reply = "Step 1: Find the <thing>\nStep 2 - Ask <name> about it\nStep 3: Bring it back"
        self.assertEqual(sub_goal_items(reply), STEPS)

    def test_hash_numbers_with_or_without_a_dot(self):
        # Qwen2.5-Coder-1.5B numbered its steps so in the autonomy evaluation; read as
        # prose, "#1." became a sub-goal of its own.
        reply = "#1. Find the <thing>\n#2. Ask <name> about it\n#3. Bring it back"
        self.assertEqual(sub_goal_items(reply), STEPS)
        reply = (
            "#1 Find the <thing>\n- Step 1: go to <place>\n#2 Ask <name> about it\n#3 Bring it back"
        )
        self.assertEqual(sub_goal_items(reply), STEPS)
        reply = "- #16a Find the <thing>\n- #16b Ask <name> about it\n- #16c Bring it back"
        self.assertEqual(sub_goal_items(reply), STEPS)

    def test_numbers_after_bullets_under_a_numbered_first_line(self):
        # Qwen2.5-Coder-1.5B wrote its steps so; read as one numbered line with bullets
        # under it as details, the reply gave one sub-goal and was refused.
        reply = "#1. Find the <thing>\n- #2. Ask <name> about it\n- #3. Bring it back"
        self.assertEqual(sub_goal_items(reply), STEPS)
        reply = "1. Find the <thing>\n* 2) Ask <name> about it\n\u2022 3. Bring it back"
        self.assertEqual(sub_goal_items(reply), STEPS)
        reply = "1. Find the <thing>\n- 2 of them are here\n2. Ask <name> about it"
        self.assertEqual(sub_goal_items(reply), STEPS[:2])

    def test_numbers_under_the_goals_own(self):
        # Qwen2.5-Coder-1.5B numbered the steps of goal #21 so; "1 " was left on each.
        reply = "- #21.1 Find the <thing>\n- #21.2 Ask <name> about it\n- #21.3 Bring it back"
        self.assertEqual(sub_goal_items(reply), STEPS)
        reply = "2.1. Find the <thing>\n2.2. Ask <name> about it\n2.3) Bring it back"
        self.assertEqual(sub_goal_items(reply), STEPS)

    def test_a_json_list_of_strings_in_a_code_fence(self):
        reply = '```json\n["Find the <thing>", "Ask <name> about it", "Bring it back"]\n```'
        self.assertEqual(sub_goal_items(reply), STEPS)

    def test_a_json_object_holding_objects(self):
        reply = (
            'Sure: {"sub_goals": [{"goal": "Find the <thing>"}, {"description": "Ask <name> '
            'about it"}, {"text": "Bring it back"}]}'
        )
        self.assertEqual(sub_goal_items(reply), STEPS)

    def test_prose_with_sequence_words(self):
        reply = (
            "To do this: first, find the <thing>. Then ask <name> about it. Finally, bring it back."
        )
        self.assertEqual(
            sub_goal_items(reply), ["Find the <thing>.", "Ask <name> about it.", "Bring it back."]
        )

    def test_a_listed_step_keeps_its_words_unless_they_only_say_its_order(self):
        reply = "1. First step\n2. Second step\n3. Then, ask <name> about it"
        self.assertEqual(
            sub_goal_items(reply), ["First step", "Second step", "Ask <name> about it"]
        )

    def test_repeats_are_left_out(self):
        self.assertEqual(
            sub_goal_items("1. Find it\n2. find it\n3. Keep it"), ["Find it", "Keep it"]
        )


class TestUsable(TestCase):
    def test_fifty_items_are_unusable_and_say_why(self):
        reply = "\n".join(f"{number}. Step {number}" for number in range(1, 51))
        self.assertEqual(usable_sub_goals(reply), ([], "50 sub-goals, more than 12"))

    def test_seven_steps_give_the_first_six(self):
        reply = "\n".join(f"- #{number} Greet guest {number}" for number in range(1, 8))
        items, why = usable_sub_goals(reply)
        self.assertEqual((items, why), ([f"Greet guest {n}" for n in range(1, 7)], ""))

    def test_one_item_or_a_refusal_is_unusable(self):
        self.assertEqual(
            usable_sub_goals("I cannot break that down."), ([], "1 usable sub-goal, fewer than 2")
        )
        self.assertEqual(usable_sub_goals(""), ([], "0 usable sub-goals, fewer than 2"))

    def test_items_over_the_length_limit_are_not_usable(self):
        reply = f"1. {'x' * 400}\n2. Short step\n3. Another step"
        self.assertEqual(usable_sub_goals(reply, max_chars=300)[0], ["Short step", "Another step"])
        reply = f"1. {'x' * 400}\n2. Short step"
        self.assertEqual(
            usable_sub_goals(reply, max_chars=300), ([], "1 usable sub-goal, fewer than 2")
        )
